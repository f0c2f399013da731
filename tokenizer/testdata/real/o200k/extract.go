//go:build ignore

// extract writes o200k_base.tiktoken (one "base64(token bytes) rank" line
// per token, the tiktoken file format) from the vocabulary that
// github.com/tiktoken-go/tokenizer ships as Go source:
//
//	go run extract.go -- $(go env GOMODCACHE)/github.com/tiktoken-go/tokenizer@v0.10.0/codec/o200k_base_vocab.go | gzip -9 > o200k_base.tiktoken.gz
package main

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"sort"
	"strconv"
)

func main() {
	f, err := parser.ParseFile(token.NewFileSet(), os.Args[len(os.Args)-1], nil, 0)
	if err != nil {
		panic(err)
	}
	type entry struct {
		tok  string
		rank int
	}
	var entries []entry
	ast.Inspect(f, func(n ast.Node) bool {
		kv, ok := n.(*ast.KeyValueExpr)
		if !ok {
			return true
		}
		k, kok := kv.Key.(*ast.BasicLit)
		v, vok := kv.Value.(*ast.BasicLit)
		if !kok || !vok || k.Kind != token.STRING || v.Kind != token.INT {
			return true
		}
		s, err := strconv.Unquote(k.Value)
		if err != nil {
			panic(err)
		}
		r, err := strconv.Atoi(v.Value)
		if err != nil {
			panic(err)
		}
		entries = append(entries, entry{s, r})
		return false
	})
	sort.Slice(entries, func(i, j int) bool { return entries[i].rank < entries[j].rank })
	w := bufio.NewWriter(os.Stdout)
	for _, e := range entries {
		fmt.Fprintf(w, "%s %d\n", base64.StdEncoding.EncodeToString([]byte(e.tok)), e.rank)
	}
	w.Flush()
}

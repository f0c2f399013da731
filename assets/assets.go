package assets

import (
	"embed"
	"io/fs"
)

//go:embed static
var embedded embed.FS

// Static holds the files of static/ at its root ("htmx.min.js", ...).
var Static fs.FS = mustSub(embedded, "static")

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		// fs.Sub fails only for an invalid path, which a constant is not.
		panic(err)
	}
	return sub
}

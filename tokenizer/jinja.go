package tokenizer

import (
	"errors"
	"reflect"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// pyList is a JSON array or a list a string method made. It indexes as
// Python does: gonja misses the last element with a negative index on a
// one-element list (x[-1] is the commonest index in chat templates).
type pyList []any

func (l pyList) GetItem(key any) (*exec.Value, bool) {
	i, ok := key.(int)
	if !ok {
		return exec.AsValue(nil), false
	}
	if i < 0 {
		i += len(l)
	}
	if i < 0 || i >= len(l) {
		return exec.AsValue(nil), false
	}
	return exec.ToValue(l[i]), true
}

// templateMethods returns gonja's methods with the ones that must keep
// Python's behaviour replaced: dict keys/values/items/get keep the order of
// the JSON object, and string splits return pyList.
func templateMethods() exec.Methods {
	base := builtins.Methods
	str := map[string]exec.Method[string]{}
	for _, name := range []string{"capitalize", "capwords", "casefold", "center", "count", "encode", "endswith",
		"expandtabs", "find", "format", "format_map", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit",
		"islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower", "lstrip",
		"partition", "removeprefix", "removesuffix", "replace", "rfind", "rjust", "rpartition", "rsplit", "rstrip",
		"split", "splitlines", "startswith", "strip", "swapcase", "title", "upper", "zfill"} {
		if m, ok := base.Str.Get(name); ok {
			str[name] = m
		}
	}
	for _, name := range []string{"split", "rsplit", "splitlines"} {
		if inner, ok := str[name]; ok {
			str[name] = func(self string, v *exec.Value, args *exec.VarArgs) (any, error) {
				out, err := inner(self, v, args)
				if err != nil {
					return out, err
				}
				// gonja returns a slice of its own string type.
				rv := reflect.ValueOf(out)
				if rv.Kind() != reflect.Slice {
					return out, nil
				}
				l := make(pyList, rv.Len())
				for i := range l {
					l[i] = rv.Index(i).String()
				}
				return l, nil
			}
		}
	}

	dict := map[string]exec.Method[map[string]any]{}
	for _, name := range []string{"keys", "values", "items", "get", "pop", "setdefault", "update", "copy", "clear"} {
		if m, ok := base.Dict.Get(name); ok {
			dict[name] = m
		}
	}
	ordered := func(name string, fn func(d *exec.Dict, args *exec.VarArgs) (any, error)) {
		inner := dict[name]
		dict[name] = func(self map[string]any, v *exec.Value, args *exec.VarArgs) (any, error) {
			if d, ok := v.Interface().(*exec.Dict); ok {
				return fn(d, args)
			}
			if inner == nil {
				return nil, errors.New(name + ": not supported")
			}
			return inner(self, v, args)
		}
	}
	noArgs := func(name string, args *exec.VarArgs) error {
		if len(args.Args) > 0 || len(args.KwArgs) > 0 {
			return errors.New(name + "() takes no arguments")
		}
		return nil
	}
	ordered("keys", func(d *exec.Dict, args *exec.VarArgs) (any, error) {
		out := make(pyList, len(d.Pairs))
		for i, p := range d.Pairs {
			out[i] = p.Key.Interface()
		}
		return out, noArgs("keys", args)
	})
	ordered("values", func(d *exec.Dict, args *exec.VarArgs) (any, error) {
		out := make(pyList, len(d.Pairs))
		for i, p := range d.Pairs {
			out[i] = p.Value.Interface()
		}
		return out, noArgs("values", args)
	})
	ordered("items", func(d *exec.Dict, args *exec.VarArgs) (any, error) {
		out := make(pyList, len(d.Pairs))
		for i, p := range d.Pairs {
			out[i] = pyList{p.Key.Interface(), p.Value.Interface()}
		}
		return out, noArgs("items", args)
	})
	ordered("get", func(d *exec.Dict, args *exec.VarArgs) (any, error) {
		if len(args.Args) < 1 || len(args.Args) > 2 {
			return nil, errors.New("get() takes 1 or 2 positional arguments")
		}
		key := args.Args[0].String()
		for _, p := range d.Pairs {
			if p.Key.String() == key {
				return p.Value.Interface(), nil
			}
		}
		if len(args.Args) == 2 {
			return args.Args[1].Interface(), nil
		}
		return nil, nil
	})

	return exec.Methods{
		Bool:  base.Bool,
		Int:   base.Int,
		Float: base.Float,
		Str:   exec.NewMethodSet(str),
		Dict:  exec.NewMethodSet(dict),
		List:  base.List,
	}
}

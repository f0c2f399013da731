// Package components holds the console's templ components and the view
// models they render. View models are plain values computed by package
// console; components only lay them out, so every decision about what a
// number means is made (and tested) in Go.
//
// The *_templ.go files are generated from the .templ files and committed;
// regenerate them from the module root with
//
//	go tool templ generate -path ./console
//
// It must not import anything of Hearth's, nor do I/O.
package components

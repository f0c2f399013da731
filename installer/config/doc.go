// Package config is the configuration every `hearth up` runs through: a
// TOML file whose keys are hearth up's flag names, under HEARTH_*
// variables, under the command line (file < variable < flag).
//
// Apply fills the flags the command line left unset, from HEARTH_*
// variables (EnvName) and else the file, and returns each flag's Setting
// (value and Source); `hearth config` prints them with Line. Template
// writes the commented file from the flag set itself, so it lists every
// flag there is. A flag that may be given more than once is defined with
// the Repeatable value, which the file sets from an array; TrackValues
// keeps the texts function and repeatable flags were set with, which the
// flag package forgets.
//
// It imports no Hearth package and knows no flag by name: the caller
// defines the flags and says which the file and the environment skip.
package config

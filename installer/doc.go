// Package installer puts Hearth on a machine as a service: the systemd
// unit (hardened), the service user, install, upgrade and uninstall, and
// install.sh, the one-line install that fetches a release archive (or uses
// go install) and runs hearth install.
//
// An Installer writes its files under a Layout (a packaging root, or /)
// and does everything else (useradd, chown, systemctl) through a Host:
// SystemHost runs the commands, PrintHost only prints them, tests record
// them. Files are replaced atomically (a synced temporary file renamed
// over the old). Upgrade keeps the replaced binary as hearth.prev and
// renames it back when the restarted service does not answer its health
// URL (ErrRolledBack). Before installing, it runs the caller's preflight
// (hearth doctor's checks, package installer/doctor) and the configuration
// file it writes comes from package installer/config.
//
// Its three jobs are three packages, so that each can change alone:
//   - installer: install, upgrade, uninstall, the unit, install.sh;
//   - installer/doctor: the host checks of hearth doctor and the Health page;
//   - installer/config: hearth up's configuration file and its layering
//     under HEARTH_* variables and flags, which every hearth up runs
//     through.
//
// None of them imports another Hearth package, and none may be imported by
// the daemon's request path.
package installer

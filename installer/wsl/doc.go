// Package wsl reads what Hearth must know of a Linux that runs inside
// Windows' WSL2: that it is one, where the Windows driver put NVML and
// nvidia-smi, how WSL networks the distribution, whether systemd runs,
// and how much host memory CUDA can pin there.
//
// Detect reads it all under a root directory ("/" on a real machine, a
// prepared directory in tests), so the same code runs against a fake WSL2
// root: /proc/sys/kernel/osrelease, /usr/lib/wsl/lib, /etc/wsl.conf,
// /proc/meminfo, the Windows user's %UserProfile%\.wslconfig as seen under
// /mnt/c/Users, and the output of wslinfo --networking-mode, which it runs
// from the root when it is there.
//
// The facts, and where they come from (cited at the versions read):
//   - WSL2 kernels name themselves "...-microsoft-standard-WSL2" in
//     osrelease; vLLM's in_wsl() looks for "microsoft" in uname
//     (vllm/platforms/interface.py).
//   - The Windows driver maps libcuda.so.1, libnvidia-ml.so.1 and
//     nvidia-smi into /usr/lib/wsl/lib; a Linux driver must not be
//     installed inside the distribution (NVIDIA, "CUDA on WSL User Guide",
//     getting started), and nvidia-smi there cannot list per-process use.
//   - networkingMode in .wslconfig's [wsl2] section is NAT by default;
//     mirrored (Windows 11 22H2 and newer) mirrors the Windows interfaces
//     and, with the Hyper-V firewall on (firewall=true, the default),
//     needs an inbound Hyper-V firewall rule for WSL's VM creator id
//     {40E0AC32-46A5-438A-A0B2-2B479E8F2E90}; under NAT only a netsh
//     interface portproxy rule on Windows lets other machines in
//     (Microsoft, WSL docs, networking.md and wsl-config.md).
//   - systemd runs in the distribution only with [boot] systemd=true in
//     /etc/wsl.conf (wsl-config.md).
//   - vLLM leaves pinned memory off under WSL (Platform.
//     is_pin_memory_available) unless VLLM_WSL2_ENABLE_PIN_MEMORY=1 in
//     the releases that read it (vllm/envs.py); Windows lets a WSL2 VM
//     pin about half of its memory (NVIDIA's guide, known limitations),
//     which bounds a RAM KV tier.
//   - Files under /mnt/<drive> are Windows files reached over 9P, read at
//     a fraction of the ext4 disk's speed (wsl-config.md, file system
//     performance): model weights and the SSD KV tier belong on ext4.
//
// The package reads files and runs wslinfo; it imports no other Hearth
// package, so that the doctor, the planner's caller and discovery can all
// ask it.
package wsl

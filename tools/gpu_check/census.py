# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""A census of CUDA entry points, independent of bpftel: the kernel's own uprobe events
(tracefs, no BPF) on every exported function of the given libraries whose name matches,
counted per function in uprobe_profile; for the allocation functions, the size argument
is traced too. tools/gpu_check/gpu_check.py compares bpftel's counts with it."""
import os
import re
import struct

TRACEFS = "/sys/kernel/tracing"
GROUP = "bpftel_census"
MATCH = re.compile(r"^(cu|cuda)(Launch|Graph(Launch|Exec)|Mem(Alloc|Free|cpy)|Malloc|Free|"
                   r"HostAlloc|ModuleGetFunction|Library|Kernel|Ctx(Synchronize|Create|"
                   r"SetCurrent|PushCurrent)|DevicePrimaryCtxRetain|Init$|SetDevice$|"
                   r"StreamSynchronize|DeviceSynchronize|EventSynchronize)")
# The size argument (second, %si) of the allocation functions traced.
SIZED = re.compile(r"^(cuMemAlloc(_v2|Managed|Host_v2|Async|FromPoolAsync)?|"
                   r"cudaMalloc(Async|Managed|Host|FromPoolAsync)?|cudaHostAlloc)$")


def dynsyms(path):
    """{file offset: name} of the defined functions in an ELF64 file's .dynsym."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return {}
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 0x36)
    loads = []
    for i in range(phnum):
        ptype, _, off, vaddr, _, filesz = struct.unpack_from("<IIQQQQ", data,
                                                              phoff + i * phentsize)
        if ptype == 1:
            loads.append((vaddr, filesz, off))
    secs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
            for i in range(shnum)]
    out = {}
    for s in secs:
        if s[1] != 11:  # SHT_DYNSYM
            continue
        strtab = secs[s[6]]
        for j in range(s[5] // 24):
            name_off, info, _, shndx, value, _ = struct.unpack_from(
                "<IBBHQQ", data, s[4] + j * 24)
            if info & 0xf != 2 or shndx == 0 or not value:  # STT_FUNC, defined
                continue
            end = data.index(b"\0", strtab[4] + name_off)
            name = data[strtab[4] + name_off:end].decode(errors="replace")
            for vaddr, filesz, off in loads:
                if vaddr <= value < vaddr + filesz:
                    out.setdefault(value - vaddr + off, name)
    return out


def symtab_size(path):
    """(entries, bytes of their names) of an ELF64 file's .symtab (local symbols, kernels'
    host stubs among them): (0, 0) where it was stripped."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:
            return 0, 0
        shoff, = struct.unpack_from("<Q", head, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", head, 0x3a)
        f.seek(shoff)
        table = f.read(shentsize * shnum)
    secs = [struct.unpack_from("<IIQQQQIIQQ", table, i * shentsize) for i in range(shnum)]
    for s in secs:
        if s[1] == 2:  # SHT_SYMTAB; its string table is section sh_link
            return s[5] // 24, secs[s[6]][5]
    return 0, 0


def _write(name, text, mode="a"):
    # os.open: Python's own append mode seeks to the end, which tracefs refuses.
    flags = os.O_WRONLY | (os.O_APPEND if mode == "a" else os.O_TRUNC)
    fd = os.open(os.path.join(TRACEFS, name), flags)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


class Census:
    def __init__(self, libs):
        self.events = {}
        self.stop()
        for lib in libs:
            tag = re.sub(r"\W", "_", os.path.basename(lib))[:12]
            for off, name in sorted(dynsyms(lib).items()):
                if not MATCH.match(name):
                    continue
                ev = f"{tag}_{name}"[:60]
                fetch = " size=%si:u64" if SIZED.match(name) else ""
                try:
                    _write("uprobe_events", f"p:{GROUP}/{ev} {lib}:{off:#x}{fetch}\n")
                except OSError:
                    continue
                self.events[ev] = (os.path.basename(lib), name)
        _write("trace", "", "w")
        if self.events:
            _write(f"events/{GROUP}/enable", "1", "w")

    def read(self):
        """({(lib, function): hits}, {(lib, function): [sizes]}) of every process: the
        checker runs one CUDA program at a time."""
        hits, sizes = {}, {}
        with open(os.path.join(TRACEFS, "uprobe_profile")) as f:
            for line in f:
                w = line.split()
                if len(w) == 3 and w[1] in self.events and int(w[2]):
                    hits[self.events[w[1]]] = int(w[2])
        with open(os.path.join(TRACEFS, "trace")) as f:
            for line in f:
                m = re.search(r"\s(\w+): \(.*?\) size=(\d+)", line)
                if m and m.group(1) in self.events:
                    sizes.setdefault(self.events[m.group(1)], []).append(int(m.group(2)))
        return hits, sizes

    def stop(self):
        if os.path.isdir(os.path.join(TRACEFS, "events", GROUP)):
            _write(f"events/{GROUP}/enable", "0", "w")
        with open(os.path.join(TRACEFS, "uprobe_events")) as f:
            mine = [line.split()[0].split(":", 1)[1] for line in f
                    if line.split()[0].split(":", 1)[-1].startswith(GROUP + "/")]
        for ev in mine:
            _write("uprobe_events", f"-:{ev}\n")


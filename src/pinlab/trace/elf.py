"""The shared libraries an ELF program says it needs (its DT_NEEDED entries), read from the file.

``pinlab trace --method auto`` picks the exact method when the program was built with ``pinlab cc``,
which shows as a DT_NEEDED entry for libpinlab-trace.so. Reading the dynamic section directly is
cheap and needs neither ldd (which runs the program's loader) nor a third-party ELF library.
"""

from __future__ import annotations

import struct

PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_NEEDED, DT_STRTAB = 0, 1, 5


def needed_libraries(path: str) -> list[str] | None:
    """The DT_NEEDED names of the ELF file at ``path``; None when it is not a readable dynamic ELF
    file (a script, a static program, another format)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if data[:4] != b"\x7fELF" or len(data) < 64:
        return None
    wide, order = data[4] == 2, "<" if data[5] == 1 else ">"
    try:
        if wide:
            (phoff,) = struct.unpack_from(order + "Q", data, 32)
            phentsize, phnum = struct.unpack_from(order + "HH", data, 54)
            header, word = order + "IIQQQQQQ", order + "qQ"
        else:
            (phoff,) = struct.unpack_from(order + "I", data, 28)
            phentsize, phnum = struct.unpack_from(order + "HH", data, 42)
            header, word = order + "IIIIIIII", order + "iI"
        loads, dynamic = [], None
        for i in range(phnum):
            fields = struct.unpack_from(header, data, phoff + i * phentsize)
            if wide:
                kind, _flags, offset, vaddr, _paddr, filesz = fields[:6]
            else:
                kind, offset, vaddr, _paddr, filesz = fields[:5]
            if kind == PT_LOAD:
                loads.append((vaddr, offset, filesz))
            elif kind == PT_DYNAMIC:
                dynamic = (offset, filesz)
        if dynamic is None:
            return None
        entries, strtab = [], None
        step = struct.calcsize(word)
        for at in range(dynamic[0], dynamic[0] + dynamic[1], step):
            tag, value = struct.unpack_from(word, data, at)
            if tag == DT_NULL:
                break
            if tag == DT_NEEDED:
                entries.append(value)
            elif tag == DT_STRTAB:
                strtab = value
        if strtab is None:
            return None
        # DT_STRTAB is an address: the file offset is found through the segment that holds it.
        base = next((offset + strtab - vaddr for vaddr, offset, size in loads if vaddr <= strtab < vaddr + size), None)
        if base is None:
            return None
        names = []
        for value in entries:
            end = data.index(b"\0", base + value)
            names.append(data[base + value : end].decode("utf-8", "replace"))
        return names
    except (struct.error, ValueError):
        return None

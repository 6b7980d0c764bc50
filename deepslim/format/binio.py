"""Little-endian primitive writer and a bounds-checked reader (docs/format.md, "Primitive encodings").

The reader raises DsmFormatError naming the section and field whenever a read would pass the end.
"""

from __future__ import annotations

import struct

from deepslim.format.errors import DsmFormatError

MAX_STR = 4096

_FORMATS = {"u8": "<B", "u16": "<H", "u32": "<I", "u64": "<Q", "i32": "<i", "i64": "<q", "f32": "<f"}


class ByteWriter:
    def __init__(self) -> None:
        self.buf = bytearray()

    def put(self, kind: str, value: int | float) -> None:
        self.buf += struct.pack(_FORMATS[kind], value)

    def put_array(self, kind: str, values: list) -> None:
        fmt = _FORMATS[kind]
        self.buf += struct.pack(f"<{len(values)}{fmt[1]}", *values)

    def put_str(self, text: str, what: str) -> None:
        raw = text.encode("utf-8")
        if len(raw) > MAX_STR:
            raise DsmFormatError(f"{what}: {len(raw)} bytes of UTF-8, more than {MAX_STR}")
        self.put("u16", len(raw))
        self.buf += raw

    def bytes(self) -> bytes:
        return bytes(self.buf)


class ByteReader:
    def __init__(self, data: bytes, section: str) -> None:
        self.data = data
        self.pos = 0
        self.section = section

    def fail(self, field: str, problem: str) -> DsmFormatError:
        return DsmFormatError(f"{self.section}: {field} {problem}")

    def _need(self, n: int, field: str) -> None:
        if self.pos + n > len(self.data):
            raise self.fail(
                field, f"at byte {self.pos} needs {n} bytes, but the {self.section} has {len(self.data)}"
            )

    def get(self, kind: str, field: str) -> int | float:
        fmt = _FORMATS[kind]
        size = struct.calcsize(fmt)
        self._need(size, field)
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return value

    def get_array(self, kind: str, n: int, field: str) -> list:
        fmt = _FORMATS[kind]
        size = struct.calcsize(fmt) * n
        self._need(size, field)
        values = list(struct.unpack_from(f"<{n}{fmt[1]}", self.data, self.pos))
        self.pos += size
        return values

    def get_str(self, field: str) -> str:
        n = self.get("u16", field + " length")
        if n > MAX_STR:
            raise self.fail(field, f"length {n} is more than {MAX_STR}")
        self._need(n, field)
        raw = self.data[self.pos : self.pos + n]
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(field, "is not valid UTF-8") from None

    def get_count(self, kind: str, limit: int, field: str) -> int:
        n = self.get(kind, field)
        if n > limit:
            raise self.fail(field, f"is {n}, more than the limit {limit}")
        return n

    def expect_end(self) -> None:
        if self.pos != len(self.data):
            raise DsmFormatError(
                f"{self.section}: {len(self.data) - self.pos} trailing bytes after byte {self.pos}"
            )

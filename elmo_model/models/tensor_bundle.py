"""TensorFlow's checkpoint files read without TensorFlow: the ``variables/`` folder of a SavedModel
or a TF Hub module (``variables.index`` and ``variables.data-SSSSS-of-NNNNN``), as numpy arrays.

The format, as TensorFlow writes it (``tensor_bundle``):

- ``variables.index`` is a LevelDB-style sorted table. Its last 48 bytes are the footer: two block
  handles (offset and size, each a varint), padding, and the 8-byte magic number. The index block
  names the data blocks; each block is a run of prefix-compressed entries (shared key bytes,
  new key bytes, value length), then its restart offsets, then a 5-byte trailer (compression
  type, checksum) that the block's size leaves out. TensorFlow writes the table uncompressed.
- The entry with the empty key is a ``BundleHeaderProto`` (number of data shards, byte order);
  every other key is a tensor's name and its value a ``BundleEntryProto``: dtype, shape, shard,
  offset and size of the tensor's bytes in ``variables.data-<shard>-of-<shards>``.

Protocol buffers are read by their wire format alone (field number, wire type), so no generated
code or ``protobuf`` package is needed. A tensor saved in slices (a partitioned variable) and
string tensors are not read: :func:`read_bundle` names them in ``skipped``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np

TABLE_MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48
BLOCK_TRAILER_SIZE = 5  # a compression byte and a 4-byte checksum after each block
#: TensorFlow's DataType numbers -> numpy dtypes (the ones a model's variables use)
DTYPES = {1: np.float32, 2: np.float64, 3: np.int32, 4: np.uint8, 5: np.int16, 6: np.int8, 9: np.int64,
          10: np.bool_, 17: np.uint16, 19: np.float16, 22: np.uint32, 23: np.uint64}
DTYPE_NAMES = {7: "string", 14: "bfloat16", 8: "complex64", 18: "complex128", 20: "resource", 21: "variant"}


class BundleError(ValueError):
    """A checkpoint that cannot be read: the message is one line naming the file."""


def _varint(buf: bytes, pos: int, where: str) -> tuple[int, int]:
    """The unsigned varint at ``buf[pos:]`` and the position after it."""
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise BundleError(f"{where}: cut short or damaged (a number runs past its end)")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def proto_fields(buf: bytes, where: str) -> Iterator[tuple[int, int, int | bytes]]:
    """The fields of a protocol buffer message: (number, wire type, value); a varint or fixed
    number as an int, a length-delimited field (a string, bytes, a message, a packed list) as bytes."""
    pos = 0
    while pos < len(buf):
        tag, pos = _varint(buf, pos, where)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _varint(buf, pos, where)
        elif wire == 1:
            value, pos = int.from_bytes(buf[pos:pos + 8], "little"), pos + 8
        elif wire == 2:
            length, pos = _varint(buf, pos, where)
            value, pos = buf[pos:pos + length], pos + length
        elif wire == 5:
            value, pos = int.from_bytes(buf[pos:pos + 4], "little"), pos + 4
        else:
            raise BundleError(f"{where}: not a protocol buffer this reader knows (wire type {wire})")
        if pos > len(buf):
            raise BundleError(f"{where}: cut short or damaged (a field runs past its end)")
        yield number, wire, value


def _block(data: bytes, handle: bytes, where: str) -> bytes:
    """The contents of the block that ``handle`` (offset, size varints) names."""
    offset, pos = _varint(handle, 0, where)
    size, _ = _varint(handle, pos, where)
    if offset + size + BLOCK_TRAILER_SIZE > len(data):
        raise BundleError(f"{where}: cut short (a block runs past the end of the file)")
    compression = data[offset + size]
    if compression != 0:
        raise BundleError(f"{where}: its blocks are compressed (type {compression}); TensorFlow writes checkpoint "
                          "indexes uncompressed, so this is not one (re-save it with TensorFlow)")
    return data[offset:offset + size]


def _block_entries(block: bytes, where: str) -> Iterator[tuple[bytes, bytes]]:
    """The (key, value) entries of one table block, keys rebuilt from their shared prefixes."""
    if len(block) < 4:
        raise BundleError(f"{where}: a block is too short to be one")
    restarts = struct.unpack_from("<I", block, len(block) - 4)[0]
    end = len(block) - 4 - 4 * restarts
    if end < 0:
        raise BundleError(f"{where}: damaged (a block's restart count is past its size)")
    pos, key = 0, b""
    while pos < end:
        shared, pos = _varint(block, pos, where)
        unshared, pos = _varint(block, pos, where)
        length, pos = _varint(block, pos, where)
        if shared > len(key) or pos + unshared + length > end:
            raise BundleError(f"{where}: damaged (an entry runs past its block)")
        key = key[:shared] + block[pos:pos + unshared]
        pos += unshared
        yield key, block[pos:pos + length]
        pos += length


def read_table(path: Path) -> dict[bytes, bytes]:
    """Every (key, value) of a LevelDB-style table file (a checkpoint's ``.index``)."""
    where = str(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise BundleError(f"{where}: cannot be read ({err.strerror or err})") from None
    if len(data) < FOOTER_SIZE or int.from_bytes(data[-8:], "little") != TABLE_MAGIC:
        raise BundleError(f"{where}: not a TensorFlow checkpoint index (no table footer)")
    footer = data[-FOOTER_SIZE:-8]
    _, pos = _varint(footer, 0, where)  # the metaindex block's handle (offset, size): unused here
    _, pos = _varint(footer, pos, where)
    index = _block(data, footer[pos:], where)  # the index block's handle follows it
    entries: dict[bytes, bytes] = {}
    for _, handle in _block_entries(index, where):
        for key, value in _block_entries(_block(data, handle, where), where):
            entries[key] = value
    return entries


@dataclass
class BundleEntry:
    """Where one tensor lies: ``dtype`` (TensorFlow's number), ``shape``, ``shard``, ``offset`` and
    ``size`` in bytes; ``sliced`` for a tensor saved in slices."""

    dtype: int = 0
    shape: tuple[int, ...] = ()
    shard: int = 0
    offset: int = 0
    size: int = 0
    sliced: bool = False


def _shape(buf: bytes, where: str) -> tuple[int, ...]:
    dims = []
    for number, _, value in proto_fields(buf, where):
        if number == 2:  # dim: a message of size (1) and name (2)
            size = next((v for n, _, v in proto_fields(value, where) if n == 1), 0)
            dims.append(size - (1 << 64) if size >= 1 << 63 else size)
        elif number == 3 and value:
            raise BundleError(f"{where}: a tensor of unknown rank")
    return tuple(dims)


def parse_entry(buf: bytes, where: str) -> BundleEntry:
    """A ``BundleEntryProto``'s fields: 1 dtype, 2 shape, 3 shard, 4 offset, 5 size, 7 slices."""
    entry = BundleEntry()
    for number, _, value in proto_fields(buf, where):
        if number == 1:
            entry.dtype = value
        elif number == 2:
            entry.shape = _shape(value, where)
        elif number == 3:
            entry.shard = value
        elif number == 4:
            entry.offset = value
        elif number == 5:
            entry.size = value
        elif number == 7:
            entry.sliced = True
    return entry


@dataclass
class Bundle:
    """A checkpoint's tensors: ``arrays`` by name; ``skipped``: name -> why it was not read."""

    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def _header(entries: dict[bytes, bytes], where: str) -> int:
    """The number of data shards, from the header entry; big-endian bundles are refused."""
    shards, endianness = 1, 0
    for number, _, value in proto_fields(entries.pop(b"", b""), where):
        if number == 1:
            shards = value
        elif number == 2:
            endianness = value
    if endianness != 0:
        raise BundleError(f"{where}: written big-endian; re-save it on a little-endian machine")
    return shards


def read_bundle(prefix: str | Path) -> Bundle:
    """The tensors of the checkpoint at ``prefix`` (``.../variables/variables``: its ``.index`` and
    data shards). ``BundleError`` (one line, naming the file) for a missing, cut or damaged file."""
    prefix = Path(prefix)
    index = prefix.with_name(prefix.name + ".index")
    if not index.is_file():
        raise BundleError(f"{index}: not found (a TensorFlow checkpoint has a .index beside its data)")
    entries = read_table(index)
    shards = _header(entries, str(index))
    bundle, data = Bundle(), {}
    for raw_name, raw_entry in sorted(entries.items()):
        name = raw_name.decode("utf-8", "replace")
        entry = parse_entry(raw_entry, f"{index} ({name})")
        dtype = DTYPES.get(entry.dtype)
        if entry.sliced or dtype is None:
            bundle.skipped[name] = "saved in slices" if entry.sliced else DTYPE_NAMES.get(entry.dtype, str(entry.dtype))
            continue
        shard = prefix.with_name(f"{prefix.name}.data-{entry.shard:05d}-of-{shards:05d}")
        if shard not in data:
            try:
                size = shard.stat().st_size
                data[shard] = np.memmap(shard, dtype=np.uint8, mode="r") if size else np.zeros(0, np.uint8)
            except OSError as err:
                raise BundleError(f"{shard}: cannot be read ({err.strerror or err}); the checkpoint is "
                                  "incomplete") from None
        count = int(np.prod(entry.shape, dtype=np.int64))
        if count * np.dtype(dtype).itemsize != entry.size or entry.offset + entry.size > len(data[shard]):
            raise BundleError(f"{shard}: cut short or damaged ({name}: {entry.size} bytes at {entry.offset} for shape "
                              f"{list(entry.shape)})")
        raw = np.asarray(data[shard][entry.offset:entry.offset + entry.size])
        bundle.arrays[name] = raw.view(np.dtype(dtype).newbyteorder("<")).astype(dtype).reshape(entry.shape).copy()
    return bundle


__all__ = ["Bundle", "BundleEntry", "BundleError", "parse_entry", "proto_fields", "read_bundle", "read_table"]

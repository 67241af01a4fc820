"""Sealed session snapshots: a versioned container, bound to its owner, encrypted and
authenticated before use.

A snapshot (``Session.snapshot``) is data a client holds and hands back (``Sandbox.resume``), so
``open_sealed`` treats it as hostile: its size is bounded, its fixed header is checked, and its
whole content is authenticated (AES-256-GCM, the header as associated data) before a byte of the
body is decrypted for use, parsed or decompressed (decompression is bounded too).

Layout, format version 4 (integers little-endian)::

    MAGIC (8) | version u16 | codec u8 | owner tag (16) | image tag (16) | salt (16) | nonce (12)
    | body length u64 | profile length u8 | runtime length u8 | profile (UTF-8) | runtime (UTF-8)
    | header tag (16) | ciphertext length u64 | ciphertext (the packed body encrypted, then the
    16-byte GCM tag)

- the body is encrypted with AES-256-GCM under a key made for this snapshot:
  ``HKDF-SHA256(secret, salt, "wasm-runner session snapshot v4" + owner)`` with a random salt
  and a random nonce, so only the same server secret and the same owner open it; the GCM tag
  covers the header (associated data) and the ciphertext: a snapshot altered in any byte fails;
- the owner tag (``HMAC(secret, "owner" + owner)``, 16 bytes) only lets the refusal say
  "foreign" rather than "tampered"; it is authenticated with the rest;
- the image tag names the module the memory belongs to (its SHA-256): a snapshot resumes only
  on the same image, built from the same wrapper;
- ``profile`` and ``runtime`` name what the session was opened under (a server's profile, empty
  from the Python API): ``read_label`` gives them once the header tag
  (``HMAC(secret, "header" + owner + the header before it)``) is checked, without decrypting
  the body, so a server picks the profile to resume under from the snapshot itself;
- the body is Zstandard-compressed before encryption (codec 1, the default: one frame at level
  1 that names its content size) or stored as it is (codec 0); docs/performance.md measured
  both. The body length is what the body inflates to: checked against the bound the resuming
  sandbox gives (``max_body``) before anything is decrypted, against the frame's own content
  size before it is inflated, and against what came out after.

Versions 1 (HMAC-SHA256 only, not encrypted), 2 (64 KiB pages, zlib or nothing) and 3 (no
profile in its header) are refused with reason ``version``. What a lost or rotated secret means: docs/security.md.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import zstandard

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ..cache import cache_dir, private_file_ok
from ..environment import SNAPSHOT_SECRET
from ..errors import WasmRunnerError

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "MAX_SNAPSHOT_BYTES",
    "Label",
    "SnapshotRefused",
    "default_secret",
    "open_sealed",
    "read_label",
    "seal",
]

MAGIC = b"WRSNAP\x00\x01"
FORMAT_VERSION = 4
MAX_SNAPSHOT_BYTES = 512 << 20  # a sealed snapshot, at most
MAX_BODY_BYTES = 4 << 30  # what its body may decompress to, at most
_VERSION = struct.Struct("<8sH")  # what every version starts with
_FIXED = struct.Struct("<8sHB16s16s16s12sQBB")  # ... up to the profile's and runtime's lengths
_TAIL = struct.Struct("<16sQ")  # header tag, ciphertext length
RAW, ZSTD = 0, 1
ZSTD_LEVEL = 1  # the fastest of the ratios measured (docs/performance.md): it runs after every cell
_MAX_WINDOW = 8 << 20  # level 1 uses at most 512 KiB; a frame asking more is refused
_GCM_TAG = 16
_KEY_INFO = b"wasm-runner session snapshot v4\x00"
_OLD = {1: "1 (not encrypted, made by an older wasm-runner)",
        2: "2 (uncompressed 64 KiB pages or zlib, made by an older wasm-runner)",
        3: "3 (without its profile, made by an older wasm-runner)"}
SECRET_ENV = SNAPSHOT_SECRET.name


@dataclass(frozen=True)
class Label:
    """What a snapshot's authenticated header says it was made under: ``profile`` (a server's
    profile name, or empty) and ``runtime``."""

    profile: str
    runtime: str


@dataclass(frozen=True)
class _Header:
    codec: int
    image_tag: bytes
    salt: bytes
    nonce: bytes
    declared: int  # what the body inflates to
    label: Label
    size: int  # the header's bytes (the associated data)


class SnapshotRefused(WasmRunnerError, ValueError):
    """A snapshot that may not be resumed here. ``reason`` says why: ``size`` (too large or
    truncated), ``format`` (not a wasm-runner snapshot), ``version`` (another format version),
    ``foreign`` (made for another owner or under another server secret), ``tampered`` (its
    authentication failed), ``image`` (made from another image or wrapper), ``state`` (its
    authenticated content does not fit this sandbox)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


def _tag(secret: bytes, label: bytes, owner: str) -> bytes:
    return hmac.new(secret, label + b"\x00" + owner.encode(), hashlib.sha256).digest()


def _check_secret(secret: bytes) -> bytes:
    if not isinstance(secret, (bytes, bytearray)) or len(secret) < 16:
        raise ValueError("a snapshot secret must be at least 16 bytes")
    return bytes(secret)


def default_secret(shared: bytes | None = None) -> bytes:
    """``$WASM_RUNNER_SNAPSHOT_SECRET`` (hex, at least 32 digits) when set; else ``shared`` when
    given (a server derives it from its replicas' cluster secret, so every replica opens every
    replica's snapshots); else a random secret kept in the private cache folder
    (``snapshot-secret``, made once, mode 0600): snapshots then resume in any process of this
    user on this machine."""
    env = SNAPSHOT_SECRET.text()
    if env:
        try:
            value = bytes.fromhex(env.strip())
        except ValueError:
            raise ValueError(f"{SECRET_ENV} must be hex") from None
        return _check_secret(value)
    if shared is not None:
        return _check_secret(shared)
    path = cache_dir() / "snapshot-secret"
    if not private_file_ok(path):
        _write_secret(path)
    return _check_secret(path.read_bytes())


def _write_secret(path: Path) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(os.urandom(32))
    try:
        os.link(tmp, path)  # the first writer wins: every process then reads the same secret
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)


def _key(secret: bytes, salt: bytes, owner: str) -> AESGCM:
    """The AES-256-GCM key of one snapshot: HKDF-SHA256 of the server secret, salted, for ``owner``."""
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=_KEY_INFO + owner.encode())
    return AESGCM(hkdf.derive(secret))


def _name(text: str, what: str) -> bytes:
    raw = text.encode("utf-8")
    if len(raw) > 255:
        raise ValueError(f"a snapshot's {what} name is at most 255 bytes")
    return raw


def _header_tag(secret: bytes, owner: str, fixed: bytes) -> bytes:
    return hmac.new(secret, b"header\x00" + owner.encode() + b"\x00" + fixed, hashlib.sha256).digest()[:16]


def seal(body: bytes, *, owner: str, secret: bytes, image: str, compress: bool = True,
         profile: str = "", runtime: str = "") -> bytes:
    """The sealed snapshot of ``body`` for ``owner``, encrypted and authenticated with a key
    derived from ``secret`` and ``owner``, resumable on the image whose SHA-256 (hex) is
    ``image``; Zstandard-compressed (before encryption) unless ``compress`` is false.
    ``profile`` and ``runtime`` (what the session was opened under) go in the authenticated
    header (``read_label``)."""
    secret = _check_secret(secret)
    if len(body) > MAX_BODY_BYTES:
        raise SnapshotRefused("size", f"the snapshot's body is {len(body) >> 20} MiB, over the "
                                      f"{MAX_BODY_BYTES >> 20} MiB a snapshot may have")
    names = _name(profile, "profile"), _name(runtime, "runtime")
    packed = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(body) if compress else body
    size = _FIXED.size + len(names[0]) + len(names[1]) + _TAIL.size + len(packed) + _GCM_TAG
    if size > MAX_SNAPSHOT_BYTES:
        raise SnapshotRefused("size", f"the snapshot is {size >> 20} MiB, over the "
                                      f"{MAX_SNAPSHOT_BYTES >> 20} MiB a snapshot may have")
    salt, nonce = os.urandom(16), os.urandom(12)
    fixed = _FIXED.pack(MAGIC, FORMAT_VERSION, ZSTD if compress else RAW, _tag(secret, b"owner", owner)[:16],
                        bytes.fromhex(image)[:16], salt, nonce, len(body), len(names[0]),
                        len(names[1])) + b"".join(names)  # fmt: skip
    head = fixed + _TAIL.pack(_header_tag(secret, owner, fixed), len(packed) + _GCM_TAG)
    return head + _key(secret, salt, owner).encrypt(nonce, packed, head)


def _header(blob: object, owner: str, secret: bytes) -> tuple[memoryview, _Header]:
    """``blob`` and its header, checked: size, magic, version, length, owner, the header's own
    tag; its body is not decrypted."""
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise SnapshotRefused("format", "a snapshot is bytes")
    view = memoryview(blob).cast("B")
    n = len(view)
    if n > MAX_SNAPSHOT_BYTES:
        raise SnapshotRefused("size", f"the snapshot is larger than {MAX_SNAPSHOT_BYTES >> 20} MiB")
    if bytes(view[:len(MAGIC)]) != MAGIC:
        raise SnapshotRefused("format", "not a wasm-runner session snapshot")
    if n < _VERSION.size:
        raise SnapshotRefused("size", "the snapshot is truncated")
    _, version = _VERSION.unpack_from(view, 0)
    if version in _OLD:
        raise SnapshotRefused("version", f"the snapshot has format version {_OLD[version]}; this "
                                         f"wasm-runner reads version {FORMAT_VERSION} only: save the "
                                         "session again")
    if version != FORMAT_VERSION:
        raise SnapshotRefused("version", f"the snapshot has format version {version}; this "
                                         f"wasm-runner reads version {FORMAT_VERSION} only")
    if n < _FIXED.size:
        raise SnapshotRefused("size", "the snapshot is truncated")
    _, _, codec, owner_tag, image_tag, salt, nonce, declared, plen, rlen = _FIXED.unpack_from(view, 0)
    fixed_end = _FIXED.size + plen + rlen
    size = fixed_end + _TAIL.size
    if n < size + _GCM_TAG:
        raise SnapshotRefused("size", "the snapshot is truncated")
    header_tag, length = _TAIL.unpack_from(view, fixed_end)
    if length != n - size:
        raise SnapshotRefused("size", "the snapshot's length does not match its header (truncated?)")
    if not hmac.compare_digest(owner_tag, _tag(secret, b"owner", owner)[:16]):
        raise SnapshotRefused("foreign", "the snapshot belongs to another key, or was made "
                                         "under another server secret")
    if not hmac.compare_digest(header_tag, _header_tag(secret, owner, bytes(view[:fixed_end]))):
        raise SnapshotRefused("tampered", "the snapshot's header failed its authentication check "
                                          "(altered or damaged)")
    try:
        label = Label(bytes(view[_FIXED.size:_FIXED.size + plen]).decode("utf-8"),
                      bytes(view[_FIXED.size + plen:fixed_end]).decode("utf-8"))
    except UnicodeDecodeError:  # authenticated, so made with this secret: still checked
        raise SnapshotRefused("format", "the snapshot's profile or runtime is not text") from None
    return view, _Header(codec, image_tag, salt, nonce, declared, label, size)


def read_label(blob: bytes, *, owner: str, secret: bytes) -> Label:
    """The profile and runtime ``blob`` records, once its header is checked and authenticated
    (``SnapshotRefused`` otherwise); its body is neither decrypted nor read."""
    return _header(blob, owner, _check_secret(secret))[1].label


def open_sealed(blob: bytes, *, owner: str, secret: bytes, image: str,
                max_body: int = MAX_BODY_BYTES) -> bytes:
    """The body of a sealed snapshot, after its size, header and authentication were checked
    and it was decrypted and inflated; raises ``SnapshotRefused`` otherwise. ``max_body``
    bounds what it may inflate to (the resuming sandbox's memory and disk, see
    ``Sandbox.resume``): the declared size is checked against it before decryption, the
    compressed frame's own size before inflation, and the inflated size after."""
    secret = _check_secret(secret)
    view, head = _header(blob, owner, secret)
    bound = min(max_body, MAX_BODY_BYTES)
    if head.declared > bound:
        raise SnapshotRefused("size", f"the snapshot's body is {head.declared >> 20} MiB, over the "
                                      f"{bound >> 20} MiB this sandbox's limits allow")
    try:  # the tag is checked over header and ciphertext before the plaintext is returned
        packed = _key(secret, head.salt, owner).decrypt(head.nonce, view[head.size:], view[:head.size])
    except InvalidTag:
        raise SnapshotRefused("tampered", "the snapshot failed its authentication check "
                                          "(altered or damaged)") from None
    if head.image_tag != bytes.fromhex(image)[:16]:
        raise SnapshotRefused("image", "the snapshot was made from another image or wrapper "
                                       "version; it cannot resume on this sandbox")
    if head.codec == RAW:
        body = packed
    elif head.codec == ZSTD:
        body = _inflate(packed, head.declared)
    else:
        raise SnapshotRefused("format", f"unknown body encoding {head.codec}")
    if len(body) != head.declared:
        raise SnapshotRefused("size", "the snapshot's body is not the size its header declares")
    return body


def _inflate(packed: bytes, declared: int) -> bytes:
    """One Zstandard frame that says it inflates to ``declared`` bytes (already bounded), with
    a bounded window, inflated into exactly that much memory."""
    try:
        frame = zstandard.get_frame_parameters(packed)
    except zstandard.ZstdError:
        raise SnapshotRefused("state", "the snapshot's body is not a Zstandard frame") from None
    if frame.content_size != declared or frame.window_size > _MAX_WINDOW:
        raise SnapshotRefused("size", "the snapshot's compressed body does not inflate to its declared "
                                      "size within bounds")
    if declared == 0:
        return b""
    try:
        return zstandard.ZstdDecompressor(max_window_size=_MAX_WINDOW).decompress(
            packed, max_output_size=declared, allow_extra_data=False)
    except zstandard.ZstdError:
        raise SnapshotRefused("state", "the snapshot's body does not inflate") from None

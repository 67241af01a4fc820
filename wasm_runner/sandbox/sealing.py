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

Format version 6 (5 was never written) is version 4 with two more fields in its fixed header,
after the body length: ``expires u64 | user tag (16)``, written when ``seal`` is given an expiry
or a user (the server's downloaded snapshots, ``GET /api/sessions/{id}/snapshot``: bound to the
key's id and, with user tokens, to the user)::

    MAGIC (8) | version u16 | codec u8 | owner tag (16) | image tag (16) | salt (16) | nonce (12)
    | body length u64 | expires u64 | user tag (16) | profile length u8 | runtime length u8 | ...

- ``expires`` is Unix seconds (0: none); a snapshot past it is refused with reason ``expired``
  once its header authenticated (the field cannot be changed without the header tag failing);
- the user tag is ``HMAC(secret, "user" + owner + user)``; a snapshot of another user of the same
  owner is refused with reason ``user`` (its owner tag matches, its user tag does not); the key
  is ``HKDF-SHA256(secret, salt, "wasm-runner session snapshot v6" + owner + user)`` and the
  header tag is made over the owner and the user too.

A snapshot with neither is still written as version 4, so a server of the previous version that
shares the snapshot folder (a rolling upgrade) still opens the sessions a new one paused; both
are read. ``read_label(..., need_expiry=True)`` (the server's ``POST /api/sessions/resume``)
refuses version 4 with reason ``version`` and a version 6 without an expiry with ``expired``.

Versions 1 (HMAC-SHA256 only, not encrypted), 2 (64 KiB pages, zlib or nothing) and 3 (no
profile in its header) are refused with reason ``version``. What a lost or rotated secret means: docs/security.md.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
import time
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
    "BOUND_VERSION",
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
FORMAT_VERSION = 4  # a snapshot without an expiry or a user (readable by the previous version)
BOUND_VERSION = 6  # ...with them
MAX_SNAPSHOT_BYTES = 512 << 20  # a sealed snapshot, at most
MAX_BODY_BYTES = 4 << 30  # what its body may decompress to, at most
_VERSION = struct.Struct("<8sH")  # what every version starts with
_FIXED = struct.Struct("<8sHB16s16s16s12sQBB")  # ... up to the profile's and runtime's lengths
_FIXED6 = struct.Struct("<8sHB16s16s16s12sQQ16sBB")  # version 6: expires and the user tag too
_TAIL = struct.Struct("<16sQ")  # header tag, ciphertext length
RAW, ZSTD = 0, 1
ZSTD_LEVEL = 1  # the fastest of the ratios measured (docs/performance.md): it runs after every cell
_MAX_WINDOW = 8 << 20  # level 1 uses at most 512 KiB; a frame asking more is refused
_GCM_TAG = 16
_KEY_INFO = b"wasm-runner session snapshot v4\x00"
_KEY_INFO6 = b"wasm-runner session snapshot v6\x00"
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
    version: int = FORMAT_VERSION
    expires_at: int = 0  # Unix seconds; 0: none (version 4 never has one)


@dataclass(frozen=True)
class _Header:
    codec: int
    image_tag: bytes
    salt: bytes
    nonce: bytes
    declared: int  # what the body inflates to
    label: Label
    size: int  # the header's bytes (the associated data)
    bound: str  # what its key was derived for (the owner; version 6: with the user)
    info: bytes  # the key derivation's info prefix (its version's)


class SnapshotRefused(WasmRunnerError, ValueError):
    """A snapshot that may not be resumed here. ``reason`` says why: ``size`` (too large or
    truncated), ``format`` (not a wasm-runner snapshot), ``version`` (another format version),
    ``foreign`` (made for another owner or under another server secret), ``tampered`` (its
    authentication failed), ``image`` (made from another image or wrapper), ``state`` (its
    authenticated content does not fit this sandbox), ``user`` (made for another user of the same
    owner), ``expired`` (past the expiry its authenticated header names, or none where one is
    required), ``packages`` (its session had packages beyond the image this server's package
    lock no longer has)."""

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


def _key(secret: bytes, salt: bytes, owner: str, info: bytes = _KEY_INFO) -> AESGCM:
    """The AES-256-GCM key of one snapshot: HKDF-SHA256 of the server secret, salted, for ``owner``."""
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=info + owner.encode())
    return AESGCM(hkdf.derive(secret))


def _bound(owner: str, user: str) -> str:
    """What a version-6 snapshot's key and header tag are made for: the owner and the user."""
    return f"{owner}\x00user\x00{user}"


def _name(text: str, what: str) -> bytes:
    raw = text.encode("utf-8")
    if len(raw) > 255:
        raise ValueError(f"a snapshot's {what} name is at most 255 bytes")
    return raw


def _header_tag(secret: bytes, owner: str, fixed: bytes) -> bytes:
    return hmac.new(secret, b"header\x00" + owner.encode() + b"\x00" + fixed, hashlib.sha256).digest()[:16]


def seal(body: bytes, *, owner: str, secret: bytes, image: str, compress: bool = True,
         profile: str = "", runtime: str = "", user: str = "", expires_at: float | None = None) -> bytes:
    """The sealed snapshot of ``body`` for ``owner``, encrypted and authenticated with a key
    derived from ``secret`` and ``owner``, resumable on the image whose SHA-256 (hex) is
    ``image``; Zstandard-compressed (before encryption) unless ``compress`` is false.
    ``profile`` and ``runtime`` (what the session was opened under) go in the authenticated
    header (``read_label``). With a ``user`` or ``expires_at`` (Unix seconds) it is version 6:
    it opens only for that user of ``owner``, and only until then."""
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
    codec, owner_tag, image_tag = ZSTD if compress else RAW, _tag(secret, b"owner", owner)[:16], bytes.fromhex(image)[:16]
    if not user and expires_at is None:  # version 4: what the previous version reads too
        fixed = _FIXED.pack(MAGIC, FORMAT_VERSION, codec, owner_tag, image_tag, salt, nonce, len(body),
                            len(names[0]), len(names[1])) + b"".join(names)  # fmt: skip
        head = fixed + _TAIL.pack(_header_tag(secret, owner, fixed), len(packed) + _GCM_TAG)
        return head + _key(secret, salt, owner).encrypt(nonce, packed, head)
    expires = 0 if expires_at is None else max(1, int(expires_at))
    bound = _bound(owner, user)
    fixed = _FIXED6.pack(MAGIC, BOUND_VERSION, codec, owner_tag, image_tag, salt, nonce, len(body), expires,
                         _tag(secret, b"user", bound)[:16], len(names[0]), len(names[1])) + b"".join(names)
    head = fixed + _TAIL.pack(_header_tag(secret, bound, fixed), len(packed) + _GCM_TAG)
    return head + _key(secret, salt, bound, _KEY_INFO6).encrypt(nonce, packed, head)


def _header(blob: object, owner: str, secret: bytes, user: str = "",
            need_expiry: bool = False) -> tuple[memoryview, _Header]:
    """``blob`` and its header, checked: size, magic, version, length, owner (and, version 6,
    user), the header's own tag and (version 6) its expiry; its body is not decrypted.
    ``need_expiry``: version 4, or a version 6 without an expiry, is refused."""
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
                                         f"wasm-runner reads version {FORMAT_VERSION} only (and version "
                                         f"{BOUND_VERSION}: version 4 with an expiry and a user): save "
                                         "the session again")
    if version not in (FORMAT_VERSION, BOUND_VERSION):
        raise SnapshotRefused("version", f"the snapshot has format version {version}; this "
                                         f"wasm-runner reads versions {FORMAT_VERSION} and {BOUND_VERSION} only")
    if need_expiry and version == FORMAT_VERSION:
        raise SnapshotRefused("version", "the snapshot has format version 4 (made by an older wasm-runner: "
                                         "bound to the key's name only, without an expiry); this server "
                                         "resumes snapshots of version 6 only: take a new snapshot")
    fixed_struct = _FIXED6 if version == BOUND_VERSION else _FIXED
    if n < fixed_struct.size:
        raise SnapshotRefused("size", "the snapshot is truncated")
    expires, user_tag = 0, b""
    if version == BOUND_VERSION:
        (_, _, codec, owner_tag, image_tag, salt, nonce, declared, expires, user_tag, plen,
         rlen) = _FIXED6.unpack_from(view, 0)
    else:
        _, _, codec, owner_tag, image_tag, salt, nonce, declared, plen, rlen = _FIXED.unpack_from(view, 0)
    fixed_end = fixed_struct.size + plen + rlen
    size = fixed_end + _TAIL.size
    if n < size + _GCM_TAG:
        raise SnapshotRefused("size", "the snapshot is truncated")
    header_tag, length = _TAIL.unpack_from(view, fixed_end)
    if length != n - size:
        raise SnapshotRefused("size", "the snapshot's length does not match its header (truncated?)")
    if not hmac.compare_digest(owner_tag, _tag(secret, b"owner", owner)[:16]):
        raise SnapshotRefused("foreign", "the snapshot belongs to another key (or to a key of the same "
                                         "name that was deleted and made again), or was made under "
                                         "another server secret")
    bound = owner if version == FORMAT_VERSION else _bound(owner, user)
    if version == BOUND_VERSION and not hmac.compare_digest(user_tag, _tag(secret, b"user", bound)[:16]):
        raise SnapshotRefused("user", "the snapshot belongs to another user of this key (it was saved "
                                      "with a user token for another user, or with one and resumed "
                                      "without)")
    if not hmac.compare_digest(header_tag, _header_tag(secret, bound, bytes(view[:fixed_end]))):
        raise SnapshotRefused("tampered", "the snapshot's header failed its authentication check "
                                          "(altered or damaged)")
    if expires and time.time() >= expires:
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(expires))
        raise SnapshotRefused("expired", f"the snapshot expired at {when}: take a new snapshot of "
                                         "a live session")
    if need_expiry and not expires:
        raise SnapshotRefused("expired", "the snapshot carries no expiry, which this server requires")
    try:
        label = Label(bytes(view[fixed_struct.size:fixed_struct.size + plen]).decode("utf-8"),
                      bytes(view[fixed_struct.size + plen:fixed_end]).decode("utf-8"), version, expires)
    except UnicodeDecodeError:  # authenticated, so made with this secret: still checked
        raise SnapshotRefused("format", "the snapshot's profile or runtime is not text") from None
    return view, _Header(codec, image_tag, salt, nonce, declared, label, size, bound,
                         _KEY_INFO6 if version == BOUND_VERSION else _KEY_INFO)


def read_label(blob: bytes, *, owner: str, secret: bytes, user: str = "", need_expiry: bool = False) -> Label:
    """The profile and runtime ``blob`` records (and its version and expiry), once its header is
    checked and authenticated for ``owner`` (version 6: and ``user``) (``SnapshotRefused``
    otherwise); its body is neither decrypted nor read. ``need_expiry``: only a version-5
    snapshot with an expiry passes."""
    return _header(blob, owner, _check_secret(secret), user, need_expiry)[1].label


def open_sealed(blob: bytes, *, owner: str, secret: bytes, image: str,
                max_body: int = MAX_BODY_BYTES, user: str = "") -> bytes:
    """The body of a sealed snapshot, after its size, header and authentication were checked
    and it was decrypted and inflated; raises ``SnapshotRefused`` otherwise (a version-5
    snapshot opens only for its ``user`` and before its expiry). ``max_body``
    bounds what it may inflate to (the resuming sandbox's memory and disk, see
    ``Sandbox.resume``): the declared size is checked against it before decryption, the
    compressed frame's own size before inflation, and the inflated size after."""
    secret = _check_secret(secret)
    view, head = _header(blob, owner, secret, user)
    bound = min(max_body, MAX_BODY_BYTES)
    if head.declared > bound:
        raise SnapshotRefused("size", f"the snapshot's body is {head.declared >> 20} MiB, over the "
                                      f"{bound >> 20} MiB this sandbox's limits allow")
    try:  # the tag is checked over header and ciphertext before the plaintext is returned
        packed = _key(secret, head.salt, head.bound, head.info).decrypt(head.nonce, view[head.size:],
                                                                        view[:head.size])
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

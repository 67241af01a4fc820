# EDITING THIS FILE REBUILDS THE SERVER'S IMAGES: its text is in every image's cache key (docs/development.md).
# A guest program's output, for both tiers: the server's CPython on WASI (guest/runner.py) and
# the browser's Pyodide (guest/browser.py). Part of the guest package ``_wasm_runner_guest``
# (guest/install.py): plain Python, standard library only, run inside the guest.
#
# sys.stdout and sys.stderr share one pending buffer that keeps the order in which the two were
# written (a switch of stream sends what is pending). While the program prints slowly each line
# goes out at once (line buffering); once it prints fast (BURST writes within WINDOW) output goes
# out in blocks: at BLOCK bytes, at the first write after the pace flag (``tick``, set by the
# server's host every WINDOW of the guest's CPU time, or 200 ms of wall time), on an explicit
# flush(), before the program reads stdin or sleeps, and when the run ends. Without a pace flag
# (the browser) the clock decides every CLOCK_EVERY writes. A print loop so costs one crossing
# into the host per block instead of one per line, and no clock reads.
#
# ``send(fd, view)`` is the tier's way out: os.write on the server (the host may also read
# ``pending`` from the guest's memory when it stops a run by force, so nothing is lost), a call
# into JavaScript in the browser. It returns how many bytes it took.
import io, os, time

# WINDOW is the flush window of both tiers (wasm_runner/tiers.py FLUSH_SECONDS; a test compares)
BLOCK, BURST, WINDOW = 16384, 128, 0.05
CLOCK_EVERY = 2048  # writes between clock reads when no pace flag is set


class Output:
    """The ordered pending output of one interpreter: ``flush()`` sends it, ``text_write(fd)`` and
    ``bytes_write(fd)`` make the streams' write functions, ``discard()`` drops what is pending;
    ``sent[fd]`` counts the bytes sent on fd 1 and 2 (where a display() stands among them)."""

    def __init__(self, pending, tick, errors, flush, text_write, bytes_write, discard, sent):
        self.pending, self.tick, self.errors, self.sent = pending, tick, errors, sent
        self.flush, self.text_write, self.bytes_write, self.discard = flush, text_write, bytes_write, discard


def ordered(send, monotonic=time.monotonic):
    """The Output that sends through ``send(fd, view)``. Its functions are closures over plain
    locals: a print costs no attribute lookups (the server's print loops depend on it)."""
    # pending[0] is the fd (1 or 2) the rest belongs to; b"WRPB" lets the host find it
    pending = bytearray(b"\x01WRPB")
    HEAD = len(pending)
    direct, writes, t0, tflush = True, 0, 0.0, 0.0  # pace: line by line, or blocks
    tick = bytearray(b"\x00WRTK")  # the pace flag (the server's host sets tick[0])
    paced = [False]  # whether the host ever set it
    errors = {1: "surrogateescape", 2: "backslashreplace"}
    sent = [0, 0, 0]  # bytes sent on fd 1 and 2

    def out_flush():
        """Send everything pending, in order."""
        if len(pending) > HEAD:
            fd = pending[0]
            view = memoryview(pending)[HEAD:]
            try:
                while view:
                    try:
                        k = send(fd, view)
                    except OSError:
                        break
                    if k <= 0:
                        break
                    sent[fd] += k
                    view = view[k:]
            finally:
                view.release()
            del pending[HEAD:]

    def switch(fd):
        out_flush()
        pending[0] = fd

    def pace():
        """The pace flag is set: what is pending goes out. Flag 1 says WINDOW of this guest's CPU
        time passed: fewer than BURST writes in it is a slow pace, written line by line again
        (flag 2 only says output is due: the host is loaded, the count means little)."""
        nonlocal direct, writes
        if tick[0] == 1:
            direct, writes = writes < BURST, 0
        tick[0] = 0
        paced[0] = True
        out_flush()

    def window():
        """Without a pace flag: every CLOCK_EVERY writes, the clock decides."""
        nonlocal direct, writes, t0, tflush
        now = monotonic()
        direct = now - t0 >= WINDOW * CLOCK_EVERY / BURST
        t0, writes = now, 0
        if direct or now - tflush >= WINDOW:
            tflush = now
            out_flush()

    def after_write(size):
        nonlocal writes, direct
        writes += 1
        if direct:
            out_flush()
            if writes >= BURST and paced[0]:  # BURST writes within WINDOW: blocks
                direct = False
        elif len(pending) >= BLOCK:
            out_flush()
        if writes >= CLOCK_EVERY and not paced[0]:
            window()

    def text_write(fd):
        err = errors[fd]

        def write(s):
            nonlocal writes, pending, direct
            try:
                data = s.encode()
            except AttributeError:
                raise TypeError("write() argument must be str, not %s" % type(s).__name__) from None
            except UnicodeEncodeError:
                data = s.encode("utf-8", err)  # as sys.stdout would, or its error
            if pending[0] != fd:
                switch(fd)
            if tick[0]:  # what waited since the last flag goes out first
                pace()
            pending += data  # in place: the buffer the host knows stays the same object
            writes += 1
            if direct:
                if "\n" in s:  # line-buffered while the pace is slow
                    out_flush()
                if writes >= BURST:  # BURST writes within WINDOW: blocks from now on
                    if paced[0]:
                        direct = False
                    elif writes >= CLOCK_EVERY:
                        window()
            elif len(pending) >= BLOCK:
                out_flush()
            elif writes >= CLOCK_EVERY and not paced[0]:
                window()
            return len(s)
        return write

    def bytes_write(fd):
        def write(b):
            data = bytes(b)
            if pending[0] != fd:
                switch(fd)
            if tick[0]:
                pace()
            pending.extend(data)
            after_write(len(data))
            return len(data)
        return write

    def discard():
        """Drop what is pending and start line by line again (the browser, before each run)."""
        nonlocal direct, writes, t0, tflush
        del pending[HEAD:]
        direct, writes, t0, tflush = True, 0, 0.0, 0.0

    return Output(pending, tick, errors, out_flush, text_write, bytes_write, discard, sent)


class _Pending:
    """What the text and the binary layer share: a writable, non-tty fd whose flush() and close()
    send what is pending (a closed stream is like a closed pipe, but what was written goes out)."""

    def writable(self):
        return True

    def fileno(self):
        return self._fd

    def isatty(self):
        return False

    def flush(self):
        self._out.flush()

    def close(self):
        self._out.flush()


class Sink(_Pending, io.RawIOBase):
    """sys.stdout.buffer / sys.stderr.buffer: bytes into the pending buffer."""

    def __init__(self, out, fd):
        self._out = out
        self._fd = fd
        self.write = out.bytes_write(fd)


class Text(_Pending, io.TextIOBase):
    """sys.stdout / sys.stderr: text into the pending buffer (pure Python: a print costs no trip
    through C and back, and no crossing into the host while output is held in blocks)."""

    def __init__(self, out, fd, name, old):
        self._out = out
        self._fd = fd
        self.name = name
        self.buffer = Sink(out, fd)
        self.write = out.text_write(fd)
        self._encoding = getattr(old, "encoding", "utf-8") or "utf-8"
        self._errors = getattr(old, "errors", "strict") or "strict"

    encoding = property(lambda self: self._encoding)
    errors = property(lambda self: self._errors)
    newlines = None
    line_buffering = False
    write_through = False
    mode = "w"

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def reconfigure(self, *, encoding=None, errors=None, newline=None, line_buffering=None,
                    write_through=None):
        self._out.flush()
        if encoding is not None:
            "".encode(encoding)  # LookupError for an unknown codec, as CPython gives
            self._encoding = encoding
        if errors is not None:
            self._errors = errors


def streams(out, stdout, stderr):
    """sys.stdout and sys.stderr for ``out`` (``stdout``/``stderr``: the interpreter's own, for
    their encoding and error handler)."""
    out.errors[1] = getattr(stdout, "errors", None) or "surrogateescape"
    out.errors[2] = getattr(stderr, "errors", None) or "backslashreplace"
    return Text(out, 1, "<stdout>", stdout), Text(out, 2, "<stderr>", stderr)


def flushing(out, function):
    """``function`` (time.sleep, os._exit, os.write ...) that first sends what is pending, with the
    original's name and doc."""
    flush = out.flush

    def call(*args):
        flush()
        return function(*args)

    call.__name__ = call.__qualname__ = function.__name__
    call.__doc__ = function.__doc__
    return call


def flushing_write(out, write=os.write):
    """os.write that sends what is pending first when it writes to fd 1 or 2 (and counts it)."""
    flush, sent = out.flush, out.sent

    def call(fd, data):
        if fd in (1, 2):
            flush()
            n = write(fd, data)
            sent[fd] += n
            return n
        return write(fd, data)

    call.__name__ = call.__qualname__ = write.__name__
    call.__doc__ = write.__doc__
    return call

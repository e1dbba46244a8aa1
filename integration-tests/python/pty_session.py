"""Drives an interactive program (the `mariadb` CLI) on a pseudo-terminal and prints a clean transcript.

The CLI only builds its tab-completion list (SHOW DATABASES, SHOW TABLES, then
COM_FIELD_LIST for every table) when it is interactive, i.e. on a terminal,
so a pipe will not do. Each --step is typed as keystrokes (backslash escapes
such as \\t for Tab are honoured); after it the line is cleared with Ctrl-U
and a sentinel query is run, whose answer marks the end of the step's
output, so the next step is typed only once the last one has been handled.

usage: pty_session.py [--step KEYS]... -- PROGRAM [ARGS]...
"""

import argparse
import codecs
import fcntl
import os
import pty
import re
import select
import struct
import sys
import termios
import time

TIMEOUT = 30


class Session:
    def __init__(self, argv):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            # A fixed window size: the completion listing is laid out in columns for it.
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
            os.execvp(argv[0], argv)
        self.pending = b""
        self.transcript = b""

    def read_until(self, pattern):
        deadline = time.time() + TIMEOUT
        while not (m := re.search(pattern, self.pending)):
            if not self.fill(deadline - time.time()):
                raise SystemExit("no %r in time; so far:\n%s" % (pattern, clean(self.transcript + self.pending)))
        self.transcript += self.pending[: m.end()]
        self.pending = self.pending[m.end():]

    def fill(self, timeout):
        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
        if not ready:
            return False
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: the program has exited and closed the terminal
            chunk = b""
        self.pending += chunk
        return bool(chunk)

    def type(self, keys):
        """Types `keys` once the line editor owns the terminal. Before that (while a command
        runs) the terminal is in canonical mode, and the driver would echo the keys itself and
        act on some (Ctrl-U erases the line), making the transcript depend on timing. On Linux
        the master side reads the slave's modes."""
        deadline = time.time() + TIMEOUT
        while termios.tcgetattr(self.fd)[3] & termios.ICANON:
            if time.time() > deadline:
                raise SystemExit("the line editor did not take the terminal")
            time.sleep(0.005)
        os.write(self.fd, keys)

    def finish(self):
        deadline = time.time() + TIMEOUT
        while self.fill(deadline - time.time()):
            pass
        self.transcript += self.pending
        _, status = os.waitpid(self.pid, 0)
        return os.waitstatus_to_exitcode(status)


def clean(raw):
    """Drops terminal control sequences and carriage returns, keeping the text."""
    text = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b\([A-Za-z0-9]|\x07|\r", b"", raw)
    return text.decode("utf-8", errors="replace")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--step", action="append", default=[])
    p.add_argument("argv", nargs="+")
    args = p.parse_args()
    session = Session(args.argv)
    session.read_until(rb"\]> ")
    for i, step in enumerate(args.step, 1):
        keys = codecs.decode(step, "unicode_escape").encode()
        keys += b"\x15SELECT 'step-%d-done' AS sentinel;\n" % i  # Ctrl-U clears the line first
        for n, line in enumerate(keys.splitlines(keepends=True)):
            if n > 0:  # the last line was a command: wait for the next prompt
                session.read_until(rb"\]> ")
            session.type(line)
        session.read_until(rb"\| step-%d-done \|[^>]*\]> " % i)
    session.type(b"\x04")  # end of input: the CLI says Bye and exits
    code = session.finish()
    sys.stdout.write(clean(session.transcript))
    print("\nexit code %d" % code)


if __name__ == "__main__":
    main()

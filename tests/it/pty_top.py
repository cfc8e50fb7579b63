"""Drive `conductor top` in a pseudo-terminal, as a person would (tests/it/live.rs).

Usage: python3 pty_top.py COLS ROWS STEP... -- CONDUCTOR_BIN [ARGS...]
Each STEP is `see:TEXT` (wait until TEXT is on the screen, then print `SEEN TEXT`), `gone:TEXT`
(wait until it is not), `key:NAME` (type a key: q, j, k, enter, esc, tab, or one character)
or `line:` (wait for a line on our stdin: the test's go-ahead). At the end, wait for the child
to exit and print `EXIT <code>`. Any wait longer than 10 s prints `TIMEOUT <step>` and the
screen, and exits 1.

The screen is kept by a minimal VT100 emulator (cursor moves, erases, printable text): enough
for what ratatui's crossterm backend writes.
"""

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

cols, rows = int(sys.argv[1]), int(sys.argv[2])
sep = sys.argv.index("--")
steps, cmd = sys.argv[3:sep], sys.argv[sep + 1:]

screen = [[" "] * cols for _ in range(rows)]
cur = [0, 0]
decoder = codecs.getincrementaldecoder("utf-8")("replace")
pending = ""
CSI = re.compile(r"\x1b\[([?0-9;]*)([ -/]*)([@-~])")


def feed(text):
    global pending
    text = pending + text
    pending = ""
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\x1b":
            m = CSI.match(text, i)
            if m is None:
                if len(text) - i < 16:
                    pending = text[i:]
                    return
                i += 2
                continue
            params, final = m.group(1), m.group(3)
            nums = [int(p) if p else 0 for p in params.lstrip("?").split(";")] if params else []
            if final == "H" or final == "f":
                r = (nums[0] if len(nums) > 0 and nums[0] else 1) - 1
                col = (nums[1] if len(nums) > 1 and nums[1] else 1) - 1
                cur[0], cur[1] = min(r, rows - 1), min(col, cols - 1)
            elif final == "J":
                for r in range(rows):
                    screen[r] = [" "] * cols
            elif final == "K":
                for col in range(cur[1], cols):
                    screen[cur[0]][col] = " "
            i = m.end()
        elif c == "\r":
            cur[1] = 0
            i += 1
        elif c == "\n":
            cur[0] = min(cur[0] + 1, rows - 1)
            i += 1
        elif c < " ":
            i += 1
        else:
            if cur[1] < cols:
                screen[cur[0]][cur[1]] = c
            cur[1] += 1
            i += 1


def text():
    return "\n".join("".join(r) for r in screen)


KEYS = {"q": b"q", "j": b"j", "k": b"k", "enter": b"\r", "esc": b"\x1b", "tab": b"\t"}

pid, fd = pty.fork()
if pid == 0:
    os.environ["TERM"] = os.environ.get("PTY_TERM", "xterm-256color")
    os.execv(cmd[0], cmd)
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def pump(timeout):
    r, _, _ = select.select([fd], [], [], timeout)
    if r:
        try:
            data = os.read(fd, 65536)
        except OSError:
            return False
        if not data:
            return False
        feed(decoder.decode(data))
    return True


def wait_for(cond, step):
    deadline = time.time() + 10
    while time.time() < deadline:
        if cond():
            return
        if not pump(0.05):
            break
    if cond():
        return
    print("TIMEOUT " + step)
    print(text())
    sys.stdout.flush()
    os.kill(pid, 9)
    sys.exit(1)


for step in steps:
    kind, _, arg = step.partition(":")
    if kind == "see":
        wait_for(lambda: arg in text(), step)
        print("SEEN " + arg)
    elif kind == "gone":
        wait_for(lambda: arg not in text(), step)
        print("GONE " + arg)
    elif kind == "key":
        os.write(fd, KEYS.get(arg, arg.encode()))
    elif kind == "line":
        sys.stdout.flush()
        sys.stdin.readline()
    sys.stdout.flush()

deadline = time.time() + 10
while time.time() < deadline:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        print("EXIT %d" % os.waitstatus_to_exitcode(status))
        sys.stdout.flush()
        sys.exit(0)
    pump(0.05)
print("TIMEOUT exit")
print(text())
os.kill(pid, 9)
sys.exit(1)

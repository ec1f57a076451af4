"""privssl.io.Progress: a line at each tenth of the work, every 30 s between, and at the end, with
done/total, elapsed time and the time left at the average pace so far (a fake clock)."""

from privssl.io import Progress, with_progress


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_line_at_each_tenth_and_every_30_seconds_between():
    clock, lines = Clock(), []
    progress = Progress(lines.append, "heads", 1000, clock=clock)
    for _ in range(1000):
        clock.now += 1.0  # one unit a second: a tenth every 100 s, so 30 s lines between
        progress.advance()
    done = [int(line.split(": ")[1].split("/")[0]) for line in lines]
    assert done[:6] == [30, 60, 90, 100, 130, 160]
    assert done[-1] == 1000 and len(done) == len(set(done))
    assert lines[0] == "heads: 30/1000 (3 %), 30 s elapsed, about 16 min 10 s left"  # 970 units at 1 s
    assert lines[-1] == "heads: 1000/1000 (100 %), 16 min 40 s elapsed, about 0 s left"


def test_fast_work_logs_only_its_tenths():
    clock, lines = Clock(), []
    progress = Progress(lines.append, "steps", 50, clock=clock)
    for _ in range(50):
        clock.now += 0.01
        progress.advance()
    assert [line.split(": ")[1].split(" ")[0] for line in lines] == [f"{5 * k}/50" for k in range(1, 11)]


def test_the_estimate_uses_the_average_pace_and_hours_read_as_hours():
    clock, lines = Clock(), []
    progress = Progress(lines.append, "epochs", 4, clock=clock)
    clock.now = 3 * 3600.0  # one unit in three hours: three units left take nine
    progress.advance()
    assert lines == ["epochs: 1/4 (25 %), 3 h 00 min elapsed, about 9 h 00 min left"]


def test_with_progress_counts_a_unit_when_its_loop_body_is_done():
    lines = []
    seen = []
    for item in with_progress(iter("abc"), 3, lines.append, "points"):
        seen.append((item, len(lines)))  # the line of an item comes after its body
    assert seen == [("a", 0), ("b", 1), ("c", 2)] and len(lines) == 3
    assert list(with_progress(iter("ab"), 2, None, "points")) == ["a", "b"]  # no log: silent

"""A class's poll: before a run the teacher asks one question ("which lane finishes first?", "continuous's mean TTFT
in steps?"), each student answers on their phone, and the teacher's screen shows the tally; at the reveal the page
sets the tally beside the run's own figure.

A poll is one of two kinds: a choice among 2 to 8 short answers (a student answers with the index of one), or a
number (any finite number). One answer per student: the page's client id (the same across its reconnects) keys it,
and answering again replaces the answer. The answers live only in the poll, and the poll only in its class
(`Klass.poll`), so they end with the class; nobody but the server sees who answered what: the teacher's view is a
tally, a student's view its own answer (and the tally once answers are closed).

The poll is about the teacher's next run: the first run the teacher starts (or stored run it shows) after asking is
the poll's run, and its start closes the answers (`attach`). `figure` names which of that run's metrics the reveal
compares with ({"metric", "lane"}: a number poll compares with that lane's figure, a choice poll with the lane whose
figure is best); the page resolves it from the run's step records, so this module never computes a metric.

`PollRules` are the poll's methods of app.runs.classes.Classes (mixed into it: they use its lock, its teacher check
and its sends). This module knows the classes' rules by those names, nothing of sockets, Flask, Redis or the engine.
"""
import math
import re
import statistics
from dataclasses import dataclass, field

from ..protocol import Rejected
from .job import STUDENT, TEACHER

CHOICE, NUMBER = "choice", "number"
MAX_QUESTION = 200    # characters of a question
MAX_CHOICE = 40       # characters of one choice
MAX_CHOICES = 8       # choices of a choice poll (at least 2)
MAX_NUMBER = 1e12     # how far from 0 a numeric answer may be
METRIC = re.compile(r"[a-z][a-z0-9_]{0,39}")   # a metric key, as the metric table spells them


@dataclass(eq=False)
class Poll:
    id: int                        # 1, 2, 3 ... within its class: an answer names the poll it answers
    question: str                  # what the teacher asked
    kind: str                      # CHOICE or NUMBER
    choices: list[str]             # a choice poll's answers, in order (empty for a number poll)
    figure: dict | None = None     # what the reveal compares with: {"metric", "lane"?}; None: no figure
    open: bool = True              # whether students may answer (closed by the teacher, or by its run's start)
    run_id: str | None = None      # the run it is about: the teacher's first run after it was asked
    answers: dict[str, float] = field(default_factory=dict)   # voter (a page's client id) -> choice index or number


def _text(value, what: str, limit: int, field_name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Rejected("invalid", f"{what} must be some text", field=field_name)
    if len(value.strip()) > limit:
        raise Rejected("invalid", f"{what} is {len(value.strip())} characters long; the limit is {limit}", field=field_name)
    return value.strip()


def _figure(figure) -> dict | None:
    if figure is None:
        return None
    if not isinstance(figure, dict) or not {"metric"} <= set(figure) <= {"metric", "lane"}:
        raise Rejected("invalid", "figure must be {metric, lane?}: which of the run's metrics the reveal shows", field="figure")
    if not isinstance(figure["metric"], str) or METRIC.fullmatch(figure["metric"]) is None:
        raise Rejected("invalid", "figure.metric must be a metric's key, such as mean_ttft_steps", field="figure.metric")
    lane = figure.get("lane")
    return {"metric": figure["metric"], **({} if lane is None else {"lane": _text(lane, "figure.lane", MAX_CHOICE, "figure.lane")})}


def new_poll(poll_id: int, question, kind, choices, figure) -> Poll:
    """A poll as the teacher asked it; `Rejected` naming the field when it cannot be one."""
    question = _text(question, "the question", MAX_QUESTION, "question")
    if kind == NUMBER:
        if choices:
            raise Rejected("invalid", "a number poll has no choices", field="choices")
        if figure is not None and _figure(figure).get("lane") is None:
            raise Rejected("invalid", "a number poll's figure names its lane: {metric, lane}", field="figure.lane")
        return Poll(poll_id, question, NUMBER, [], _figure(figure))
    if kind != CHOICE:
        raise Rejected("invalid", f"kind must be {CHOICE!r} or {NUMBER!r}", field="kind")
    if not isinstance(choices, list) or not 2 <= len(choices) <= MAX_CHOICES:
        raise Rejected("invalid", f"a choice poll has 2 to {MAX_CHOICES} choices", field="choices")
    texts = [_text(c, f"choice {i + 1}", MAX_CHOICE, "choices") for i, c in enumerate(choices)]
    if len(set(texts)) < len(texts):
        raise Rejected("invalid", "two choices say the same", field="choices")
    return Poll(poll_id, question, CHOICE, texts, _figure(figure))


def check_answer(poll: Poll | None, poll_id, value) -> float:
    """`value` as an answer to `poll` (answering poll `poll_id`); `Rejected` saying why it is not one."""
    if poll is None or poll.id != poll_id:
        raise Rejected("not_found", "that poll is not the class's poll any more: answer the question on screen", field="poll")
    if not poll.open:
        raise Rejected("closed", "the poll is closed: its answers are in", field="poll")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise Rejected("invalid", "an answer is a finite number (a choice's index, or your number)", field="answer")
    if poll.kind == CHOICE and (value != int(value) or not 0 <= value < len(poll.choices)):
        raise Rejected("invalid", f"there is no choice {value!r}: pick one of the {len(poll.choices)}", field="answer")
    if abs(value) > MAX_NUMBER:
        raise Rejected("invalid", f"the answer is too far from 0 (at most {MAX_NUMBER:g} either way)", field="answer")
    return int(value) if poll.kind == CHOICE else value


def attach(poll: Poll | None, run_id: str) -> None:
    """The teacher's run `run_id` started or is shown: the first after the poll was asked is its run, and closes it."""
    if poll is not None and poll.run_id is None:
        poll.run_id, poll.open = run_id, False


def tally(poll: Poll) -> dict:
    """What the class answered, without who: {answered, counts} of a choice poll; {answered, median, q1, q3, low, high}
    of a number poll (None without answers; q1..q3 hold the middle half of the answers)."""
    values = list(poll.answers.values())
    if poll.kind == CHOICE:
        return {"answered": len(values), "counts": [values.count(i) for i in range(len(poll.choices))]}
    if not values:
        return {"answered": 0, "median": None, "q1": None, "q3": None, "low": None, "high": None}
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else values * 3
    return {"answered": len(values), "median": statistics.median(values), "q1": q1, "q3": q3,
            "low": min(values), "high": max(values)}


def poll_view(poll: Poll | None, role: str, voter: str | None = None) -> dict | None:
    """The poll as a member sees it: the teacher with the tally; a student with its own answer (to its socket only), and
    the tally once answers are closed."""
    if poll is None:
        return None
    view = {"id": poll.id, "question": poll.question, "kind": poll.kind, "choices": list(poll.choices),
            "figure": poll.figure, "open": poll.open, "run_id": poll.run_id}
    if role == TEACHER or not poll.open:
        view["tally"] = tally(poll)
    if voter is not None:
        view["yours"] = poll.answers.get(voter)
    return view


class PollRules:
    """The poll's methods of app.runs.classes.Classes: the teacher asks and closes, a student answers."""

    def ask(self, sid: str, code: str, token: str, question, kind, choices, figure, queued: list) -> list:
        """The teacher asks the class a question (replacing any poll before it): every student's page shows it."""
        with self._locked():
            klass = self._teacher_of(sid, code, token)
            klass.poll = new_poll(klass.poll.id + 1 if klass.poll else 1, question, kind, choices, figure)
            return [s for s in (self._student_send(klass), self._teacher_send(klass, queued)) if s is not None]

    def close_poll(self, sid: str, code: str, token: str, queued: list) -> list:
        """The teacher closes the answers: the students' pages show the tally."""
        with self._locked():
            klass = self._teacher_of(sid, code, token)
            if klass.poll is None:
                raise Rejected("not_found", f"class {klass.code} has no poll to close", field="poll")
            klass.poll.open = False
            return [s for s in (self._student_send(klass), self._teacher_send(klass, queued)) if s is not None]

    def answer(self, sid: str, voter: str, code: str, poll_id, value, queued: list) -> list:
        """A student of class `code` answers its poll (`voter`: its page's client id; again: the answer replaces the
        one before); the student's page is sent its answer, the teacher the tally."""
        with self._locked():
            klass = self._find(code)
            if self.member.get(sid) != (klass.code, STUDENT):
                raise Rejected("forbidden", f"only a student of class {klass.code} answers its poll", field="poll")
            klass.poll.answers[voter] = check_answer(klass.poll, poll_id, value)
            return [s for s in (self._student_send(klass, sid, voter), self._teacher_send(klass, queued)) if s is not None]

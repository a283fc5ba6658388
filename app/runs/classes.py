"""Classes: a teacher's page opens one (a short code, a link /c/<code>), students' pages join it and watch the
teacher's runs; the teacher may allow students to submit their own, which then queue behind the teacher's
(app.runs.queue_order) up to a per-class cap.

The teacher is whoever holds the class's token: a random secret sent only to the page that opened the class
(which keeps it in sessionStorage, so a reload rejoins as the teacher); a student cannot guess it. The teacher may
ask the class a question before a run (app.runs.polls: the answers live in the class and end with it). A class ends
when its teacher closes it, or when the teacher's page has been gone for `grace_s`; its students are told.
Like a run book, `Classes` returns what to send (`protocol.Send`, `Enter`) and its caller delivers it. One lock
guards everything. The classes live in this process's memory (app.runs.redis_classes keeps them in Redis for a
deployment of several web processes). This module knows socket ids and jobs, nothing of Flask, Redis or the engine.
"""
import functools
import secrets
import threading
import time
from dataclasses import dataclass, field

from ..protocol import Enter, Event, Rejected, Send
from .job import STUDENT, TEACHER, Job
from .polls import Poll, PollRules, attach, poll_view

ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"   # no 0/O, 1/I/L: a code read off a projector is typed right
CODE_LENGTH = 5


def new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


def students_room(code: str) -> str:
    """The room of a class's students (the teacher's page is sent its own state, with the token, directly)."""
    return f"class:{code}"


def _sends(method):
    """A public method's answer without the teacher's sends that were not needed (None)."""
    @functools.wraps(method)
    def call(*args, **kwargs):
        return [s for s in method(*args, **kwargs) if s is not None]
    return call


@dataclass(eq=False)
class Klass:
    code: str
    token: str                                       # the teacher's secret
    teacher: str | None                              # the teacher's socket id (None: gone, within the grace)
    students: set[str] = field(default_factory=set)  # students' socket ids
    allow_submit: bool = False                       # whether students may submit runs of their own
    locked: bool = False                             # submits locked for now (a demo): refused with a message
    run_id: str | None = None                        # the teacher's latest run, which students' pages watch
    left_at: float | None = None                     # wall-clock time the teacher's socket left
    sent: dict | None = None                         # the teacher's state as last sent (sent again only if changed)
    poll: Poll | None = None                         # the question the teacher asked, with the answers (app.runs.polls)


def _name(job: Job) -> str:
    """A job's workload name, as the teacher's bar lists it."""
    workload = job.request.get("workload") if isinstance(job.request, dict) else None
    return str(workload.get("name") or "a mix")[:40] if isinstance(workload, dict) else "a mix"


class Classes(PollRules):
    def __init__(self, grace_s: float, max_classes: int, max_students: int):
        self.grace_s, self.max_classes, self.max_students = grace_s, max_classes, max_students
        self.lock = threading.Lock()
        self.classes: dict[str, Klass] = {}
        self.member: dict[str, tuple[str, str]] = {}   # socket id -> (class code, TEACHER or STUDENT)
        self.chores_running = False                    # whether a task refreshes them (app.web.class_events)
        self.running_jobs = lambda: []                 # the executing jobs (the run book's, set by the web wing)

    # -- asked by the class's socket handlers (app.web.class_events) -----------------------------------
    @_sends
    def open(self, sid: str, queued: list[Job]) -> list:
        """`sid` opens a class and is its teacher (a teacher's page opening again gets its own class back)."""
        with self._locked():
            code, role = self.member.get(sid, (None, None))
            if role == TEACHER and code in self.classes:
                return [self._teacher_send(self.classes[code], queued)]
            if len(self.classes) >= self.max_classes:
                raise Rejected("busy", f"this server holds {self.max_classes} open classes, its limit; close one first")
            sends = self._leave(sid)
            code = new_code()
            while code in self.classes:
                code = new_code()
            klass = self.classes[code] = Klass(code, secrets.token_urlsafe(24), sid)
            self.member[sid] = (code, TEACHER)
            return sends + [self._teacher_send(klass, queued)]

    @_sends
    def join(self, sid: str, code: str, token: str | None, queued: list[Job]) -> list:
        """`sid` joins class `code`: as its teacher with the class's token, else as a student."""
        with self._locked():
            klass = self._find(code)
            if token is not None and not secrets.compare_digest(token, klass.token):
                raise Rejected("forbidden", f"that is not the teacher's token of class {code}", field="token")
            if self.member.get(sid) == (code, TEACHER if token else STUDENT):
                return [self._teacher_send(klass, queued) if token else self._student_send(klass, sid)]
            if token is None and len(klass.students) >= self.max_students:
                raise Rejected("class_full", f"class {code} has {self.max_students} students, the limit (max_class_students)",
                               field="code")
            sends = self._leave(sid)
            self.member[sid] = (code, TEACHER if token else STUDENT)
            if token:
                klass.teacher, klass.left_at = sid, None
                return sends + [self._teacher_send(klass, queued)]
            klass.students.add(sid)
            return sends + [Enter(sid, students_room(code)), self._student_send(klass, sid),
                            self._teacher_send(klass, queued)]

    @_sends
    def allow(self, sid: str, code: str, token: str, allow: bool, queued: list[Job]) -> list:
        """The teacher allows (or stops) students' own submits."""
        with self._locked():
            klass = self._teacher_of(sid, code, token)
            klass.allow_submit = allow
            return [self._student_send(klass), self._teacher_send(klass, queued)]

    @_sends
    def lock_submits(self, sid: str, code: str, token: str, locked: bool, queued: list[Job]) -> list:
        """The teacher locks (or unlocks) students' submits for a while, whatever `allow` says: a locked submit is
        refused with a message, and the students' runs already queued stay queued."""
        with self._locked():
            klass = self._teacher_of(sid, code, token)
            klass.locked = locked
            return [self._student_send(klass), self._teacher_send(klass, queued)]

    @_sends
    def refresh(self, code: str, queued: list[Job]) -> list:
        """The teacher's view of class `code` again (its queue changed)."""
        with self._locked():
            klass = self.classes.get(code)
            return [self._teacher_send(klass, queued)] if klass is not None else []

    def check_teacher(self, sid: str, code: str, token: str) -> str:
        """The class's code if `sid` is its teacher (with its token); `Rejected` otherwise."""
        with self._locked():
            return self._teacher_of(sid, code, token).code

    def is_teacher(self, sid: str) -> bool:
        """Whether `sid` is the teacher of an open class (whose submits are outside the students' rate limit)."""
        with self._locked():
            code, role = self.member.get(sid, (None, None))
            klass = self.classes.get(code)
            return role == TEACHER and klass is not None and klass.teacher == sid

    @_sends
    def show(self, sid: str, code: str, token: str, run_id: str) -> list:
        """The teacher's page shows a stored run (a reference run, a replay): the students watch it too."""
        with self._locked():
            klass = self._teacher_of(sid, code, token)
            if klass.run_id == run_id:
                return []
            klass.run_id = run_id
            attach(klass.poll, run_id)   # the teacher's view follows with the next chores
            return [self._student_send(klass)]

    @_sends
    def close(self, sid: str, code: str, token: str) -> list:
        with self._locked():
            return self._close(self._teacher_of(sid, code, token), "the teacher closed the class")

    # -- asked when a run is submitted, and when a socket leaves ----------------------------------------
    def tag(self, sid: str) -> tuple[str | None, str | None]:
        """(class code, role) a job `sid` submits carries, (None, None) outside a class; `Rejected` for a
        student whose teacher has not allowed submits."""
        with self._locked():
            code, role = self.member.get(sid, (None, None))
            if code is not None and code not in self.classes:   # it ended (on another web process)
                del self.member[sid]
                return None, None
            if role == STUDENT and not self.classes[code].allow_submit:
                raise Rejected("view_only", f"class {code} is view-only: the teacher has not allowed students to "
                                            f"submit runs", field="class")
            if role == STUDENT and self.classes[code].locked:
                raise Rejected("locked", f"class {code}: the teacher has locked submits for now; watch the teacher's "
                                         f"run (your own can go once they unlock them)", field="class")
            return code, role

    @_sends
    def submitted(self, job: Job, queued: list[Job]) -> list:
        """A class job was queued: a teacher's run is the one its students watch; the teacher sees the queue."""
        with self._locked():
            klass = self.classes.get(job.class_code)
            if klass is None:
                return []
            if job.role == TEACHER and job.kind == "run":
                klass.run_id = job.run_id
                attach(klass.poll, job.run_id)
                return [self._student_send(klass), self._teacher_send(klass, queued)]
            return [self._teacher_send(klass, queued)]

    @_sends
    def forget(self, sid: str, queued: list[Job]) -> list:
        """`sid` disconnected: a student leaves its class; a teacher's class waits `grace_s` for it to come back."""
        with self._locked():
            code, role = self.member.pop(sid, (None, None))
            klass = self.classes.get(code)
            if klass is None:
                return []
            if role == TEACHER:
                if klass.teacher == sid:
                    klass.teacher, klass.left_at = None, time.time()
                return []
            klass.students.discard(sid)
            return [self._teacher_send(klass, queued, only_if_changed=True)]

    @_sends
    def chores(self, queued: list[Job]) -> list:
        """Every second or so: end classes whose teacher stayed away for the grace; refresh each teacher's view."""
        with self._locked():
            sends = []
            for klass in list(self.classes.values()):
                if klass.left_at is not None and time.time() - klass.left_at >= self.grace_s:
                    sends += self._close(klass, f"the teacher left more than {self.grace_s:.0f} s ago")
                elif klass.teacher is not None:
                    sends.append(self._teacher_send(klass, queued, only_if_changed=True))
            return sends

    def may_record(self, code: str | None, token: str | None) -> None:
        """Whether a page may record a preset's reference run: anyone while no class is open; while one is, only a
        teacher of an open class (its code and token). `Rejected` naming why otherwise."""
        with self._locked():
            if not self.classes:
                return
            klass = self.classes.get(code.upper()) if isinstance(code, str) else None
            if klass is not None and isinstance(token, str) and secrets.compare_digest(token, klass.token):
                return
            which = f"class {klass.code} is open" if klass is not None else "a class is open on this server"
            raise Rejected("forbidden", f"{which}: only its teacher may record a reference run (a student's page "
                                        f"only plays them)", field="token")

    def __len__(self) -> int:
        return len(self.classes)

    def is_open(self, code: str) -> bool:
        with self._locked():
            return code.upper() in self.classes

    def _locked(self):
        """Hold the classes (app.runs.redis_classes also reads them from Redis first and writes them back after)."""
        return self.lock

    # -- rules (lock held) ---------------------------------------------------------------------------------
    def _find(self, code: str) -> Klass:
        klass = self.classes.get(code.upper()) if isinstance(code, str) else None
        if klass is None:
            raise Rejected("not_found", f"no open class {code!r}: check the code, or ask the teacher to open one",
                           field="code")
        return klass

    def _teacher_of(self, sid: str, code: str, token: str) -> Klass:
        klass = self._find(code)
        if not isinstance(token, str) or not secrets.compare_digest(token, klass.token) or klass.teacher != sid:
            raise Rejected("forbidden", f"only the teacher of class {code} may do that", field="token")
        return klass

    def _leave(self, sid: str) -> list:
        """`sid` leaves the class it is in (a student), before it opens or joins another."""
        code, role = self.member.pop(sid, (None, None))
        klass = self.classes.get(code)
        if klass is not None and role == STUDENT:
            klass.students.discard(sid)
        elif klass is not None and role == TEACHER and klass.teacher == sid:
            klass.teacher, klass.left_at = None, time.time()
        return []

    def _close(self, klass: Klass, reason: str) -> list:
        del self.classes[klass.code]
        for sid in [s for s, (code, _) in self.member.items() if code == klass.code]:
            del self.member[sid]
        payload = {"code": klass.code, "message": f"class {klass.code} ended: {reason}"}
        sends = [Send(Event.CLASS_CLOSED, payload, students_room(klass.code))]
        return sends + ([Send(Event.CLASS_CLOSED, payload, klass.teacher)] if klass.teacher else [])

    def _public(self, klass: Klass) -> dict:
        return {"code": klass.code, "link": f"/c/{klass.code}", "allow_submit": klass.allow_submit,
                "locked": klass.locked, "students": len(klass.students), "run_id": klass.run_id}

    def _student_send(self, klass: Klass, sid: str | None = None, voter: str | None = None) -> Send:
        """A student's view of the class, to `sid` (with its own answer: `voter`) or to every student of it."""
        poll = poll_view(klass.poll, STUDENT, voter)
        return Send(Event.CLASS_STATE, {**self._public(klass), "role": STUDENT, "poll": poll}, sid or students_room(klass.code))

    def _teacher_send(self, klass: Klass, queued: list[Job], only_if_changed: bool = False) -> Send | None:
        """The teacher's view: with its token, how many students, and the class's queued runs (whose, where)."""
        runs = [{"run_id": job.run_id, "position": i + 1, "role": job.role, "name": _name(job)}
                for i, job in enumerate(queued) if job.class_code == klass.code]
        running = [{"run_id": job.run_id, "role": job.role, "name": _name(job)}
                   for job in self.running_jobs() if job.class_code == klass.code]
        state = {**self._public(klass), "role": TEACHER, "token": klass.token, "queued": runs, "running": running,
                 "poll": poll_view(klass.poll, TEACHER)}
        if klass.teacher is None or (only_if_changed and state == klass.sent):
            return None
        klass.sent = state
        return Send(Event.CLASS_STATE, state, klass.teacher)

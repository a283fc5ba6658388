"""Where a job joins the queue, and what is ahead of it: the one rule both run books follow (app.runs.memory_book,
app.runs.redis_book), written once as plain functions of the queued jobs.

Without a class every job joins at the end, as it always has. In a class (app.runs.classes) the teacher goes
first: a teacher's job joins before the first queued student job of its class (never before anything else, and a
running job is never preempted), and a class holds at most `cap` queued student jobs. This module knows jobs,
nothing of sockets, Redis or the engine.
"""
from ..protocol import Rejected, queued_payload
from .job import STUDENT, TEACHER, Job


def insert_index(queued: list[Job], job: Job) -> int:
    """Where `job` joins `queued` (next first): before its class's first queued student job if it is the teacher's."""
    if job.role == TEACHER:
        for i, other in enumerate(queued):
            if other.class_code == job.class_code and other.role == STUDENT:
                return i
    return len(queued)


def check_class_cap(queued: list[Job], job: Job, cap: int) -> None:
    """`Rejected` ("class_full", naming the cap) when `job` is a student's and its class already queues `cap`."""
    if job.role != STUDENT:
        return
    waiting = sum(1 for other in queued if other.class_code == job.class_code and other.role == STUDENT)
    if waiting >= cap:
        raise Rejected("class_full", f"the class's queue is full: {waiting} student runs wait and the limit is {cap} "
                                     f"per class (max_class_queued); try again when one has run", field="class")


def ahead_of(queued: list[Job], index: int) -> dict[str, int]:
    """Whose jobs wait ahead of `queued[index]`: the teacher's, students', others' (other classes, no class)."""
    counts = {"teacher": 0, "student": 0, "other": 0}
    job = queued[index]
    for other in queued[:index]:
        same = other.class_code is not None and other.class_code == job.class_code
        counts[other.role if same and other.role in (TEACHER, STUDENT) else "other"] += 1
    return counts


def position_payload(queued: list[Job], index: int) -> dict:
    """`run_queued` of `queued[index]`: its position, and for a class job whose runs are ahead of it."""
    job = queued[index]
    return queued_payload(job.run_id, index + 1, ahead_of(queued, index) if job.class_code else None)

"""Classes at scale: a class on two web processes over Redis (a real redis-server, an engine worker on the paced
simulator) and fifty python-socketio students each receiving every tick of the teacher's run."""
import threading

import pytest

from tests.kit.classroom import MIX, wait_until


# -- a class on a web process over Redis (a real redis-server, an engine worker on the paced simulator) ------

LONG = {"name": "long", "slots": 2, "requests": [{"id": f"R{i}", "prompt": "Count slowly.", "max_new_tokens": 40,
                                                  "ignore_eos": True} for i in range(3)]}


def class_client(d, web: int = 0):
    client = d.client(web)
    for name in ("class_state", "class_closed"):
        client.sio.on(name, lambda payload, name=name: client._got(name, payload))
    return client


@pytest.mark.redis
def test_over_redis_students_on_another_web_process_queue_behind_the_teacher_and_follow_its_run(tmp_path):
    from tests.kit.scale import deployment

    with deployment(tmp_path, webs=2, workers=1) as d:
        teacher, outsider = class_client(d), class_client(d)
        teacher.emit("class_open", {})
        state = teacher.wait_for("class_state", timeout=30)
        students = [class_client(d, web=1) for _ in range(3)]   # the class is in Redis: any web process has it
        for s in students:
            s.emit("class_join", {"code": state["code"]})
            s.wait_for("class_state", timeout=30)
        teacher.emit("class_allow", {"code": state["code"], "token": state["token"], "allow": True})
        wait_until(lambda: all(s.named("class_state")[-1]["allow_submit"] for s in students))
        outsider.emit("submit", {"workload": LONG})
        first = outsider.wait_for("run_started", timeout=60)["run_id"]   # executing while the class queues
        for i, s in enumerate(students):
            s.emit("submit", {"workload": {**LONG, "name": f"student-{i}"}})
            s.wait_for("run_queued", timeout=30)
        teacher.emit("submit", {"workload": {**MIX, "name": "mixed"}})
        queued = teacher.wait_for("run_queued", timeout=30)
        assert queued["position"] == 1 and queued["ahead"] == {"teacher": 0, "student": 0, "other": 0}
        wait_until(lambda: students[0].named("class_state")[-1]["run_id"] == queued["run_id"])
        wait_until(lambda: students[0].named("run_queued")[-1]["ahead"]["teacher"] == 1)
        wait_until(lambda: teacher.named("class_state")[-1]["students"] == 3)
        started = teacher.wait_for("run_started", queued["run_id"], timeout=120)
        assert started and outsider.named("run_finished", first)
        assert not any(s.named("run_started") for s in students)   # the teacher's ran next
        teacher.emit("class_close", {"code": state["code"], "token": state["token"]})
        for s in students:
            assert "the teacher closed the class" in s.wait_for("class_closed", timeout=30)["message"]



@pytest.mark.slow
def test_fifty_python_socketio_students_each_receive_every_tick_of_the_teachers_run():
    from tests.kit.server import EventClient, live_server

    with live_server("--backend", "sim", "--pace", "0.2", "--limit", "watches_per_minute=1000") as url:
        def client():
            c = EventClient(url)
            c.sio.on("class_state", lambda payload: c._got("class_state", payload))
            return c
        teacher = client()
        clients = [teacher]
        try:
            teacher.emit("class_open", {})
            code = teacher.wait_for("class_state", timeout=30)["code"]
            for _ in range(50):
                clients.append(client())
                clients[-1].emit("class_join", {"code": code})
            wait_until(lambda: teacher.named("class_state")[-1]["students"] == 50)
            teacher.emit("submit", {"workload": LONG})
            run_id = teacher.wait_for("run_queued", timeout=30)["run_id"]
            for s in clients[1:]:                                  # as a student's page does on class_state
                wait_until(lambda: s.named("class_state") and s.named("class_state")[-1]["run_id"] == run_id)
                s.emit("watch", {"run_id": run_id})
            teacher.wait_for("run_finished", run_id, timeout=120)
            ticks = sorted(p["t"] for p in teacher.named("tick", run_id))
            assert ticks == list(range(1, len(ticks) + 1)) and len(ticks) >= 40
            for s in clients[1:]:
                s.wait_for("run_finished", run_id, timeout=60)
                assert sorted(p["t"] for p in s.named("tick", run_id)) == ticks   # each once: backlog, then live
        finally:   # a client's disconnect waits for its transport (seconds): all at once
            closing = [threading.Thread(target=c.close) for c in clients]
            for t in closing:
                t.start()
            for t in closing:
                t.join(30)

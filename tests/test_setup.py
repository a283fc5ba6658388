"""The README's test command is the whole set-up: `make test` installs Chromium for the browser tests and
redis-server for the scale-out tests where it may, or stops at once with the one command to run, and never lets
them skip."""
import os
import subprocess

from tests.kit import ROOT

SCRIPT = ROOT / "scripts" / "need_browser.sh"
REDIS_SCRIPT = ROOT / "scripts" / "need_redis.sh"


def need_browser(**env):
    return subprocess.run([str(SCRIPT)], capture_output=True, text=True, timeout=60, env={**os.environ, **env})


def need_redis(**env):
    return subprocess.run([str(REDIS_SCRIPT)], capture_output=True, text=True, timeout=60, env={**os.environ, **env})


def test_a_machine_with_chromium_goes_on_quietly():
    done = need_browser(CHROMIUM="/bin/sh")  # any executable stands for the browser here
    assert done.returncode == 0 and done.stdout == done.stderr == ""


def test_without_chromium_and_no_way_to_install_it_make_stops_with_the_command_to_run(tmp_path):
    failing_apt = tmp_path / "apt-get"
    failing_apt.write_text("#!/bin/sh\nexit 100\n")
    failing_apt.chmod(0o755)
    done = need_browser(CHROMIUM=str(tmp_path / "no-chromium"), APT_GET=str(failing_apt))
    assert done.returncode == 1
    assert "sudo apt-get install -y chromium" in done.stderr and str(tmp_path / "no-chromium") in done.stderr


def test_make_test_requires_the_browser_and_forbids_skipping_it():
    plan = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    assert "scripts/need_browser.sh" in plan
    assert "BATCH_LANES_REQUIRE_BROWSER=1" in plan and "scripts/test_pair.sh" in plan
    assert plan.index("need_browser.sh") < plan.index("scripts/test_pair.sh")
    pair = (ROOT / "scripts" / "test_pair.sh").read_text()   # its two halves: every test in one or the other
    assert '-m "$WAITS"' in pair and '-m "not ($WAITS)"' in pair and "not model and not browser" in pair


def test_without_redis_server_and_no_way_to_install_it_make_stops_with_the_command_to_run(tmp_path):
    failing_apt = tmp_path / "apt-get"
    failing_apt.write_text("#!/bin/sh\nexit 100\n")
    failing_apt.chmod(0o755)
    assert need_redis(REDIS_SERVER="/bin/sh").returncode == 0   # any executable stands for redis-server here
    done = need_redis(REDIS_SERVER=str(tmp_path / "no-redis"), APT_GET=str(failing_apt))
    assert done.returncode == 1 and "sudo apt-get install -y redis-server" in done.stderr


def test_make_test_requires_redis_and_forbids_skipping_the_scale_out_tests():
    plan = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    assert "scripts/need_redis.sh" in plan and "BATCH_LANES_REQUIRE_REDIS=1" in plan
    assert plan.index("need_redis.sh") < plan.index("scripts/test_pair.sh")

import json, os, time
T0 = float(os.environ.get("TL_T0", time.time()))
_out = os.environ.get("TL_OUT", "/tmp/timeline.jsonl")
_start = {}
def pytest_runtest_logstart(nodeid, location):
    _start[nodeid] = time.time()
def pytest_runtest_logfinish(nodeid, location):
    with open(_out, "a") as f:
        f.write(json.dumps({"w": os.environ.get("PYTEST_XDIST_WORKER", "main"), "id": nodeid,
                            "s": _start.get(nodeid, 0) - T0, "e": time.time() - T0}) + "\n")

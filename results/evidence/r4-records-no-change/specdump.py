"""Every shipped study file's StudySpec as JSON (what study.json holds) and its parts' reprs.
Run from a checkout root: ``PYTHONPATH=$PWD python specdump.py OUT.json``."""
import json, sys, glob
from autotune.space import load_study
out = {}
for f in sorted(glob.glob("autotune/search_spaces/*.yaml")):
    s = load_study(f)
    d = json.loads(json.dumps(s.to_json(), default=str))
    d.pop("source")
    out[f] = {"json": d, "plan": repr(s.plan), "workload": repr(s.workload), "sim": repr(s.sim), "fin": repr(s.finalists), "stop": repr(s.stop_when)}
json.dump(out, open(sys.argv[1], "w"), indent=1, sort_keys=True)

"""`train.ensemble_size = K`: K member jobs and the aggregation step that writes the best-of-K run.

Member i is the single run with seed `seed + i` in `members/<i>/` (its own `.hydra/config.yaml`,
checkpoint, summary with the config_hash of its single-run config, analyses), trained with the
others as one stacked group (`run.train_runs`), so it equals that single run to round-off and a
relaunch resumes or reuses each member by itself. The top directory then gets:
  summary.json    the best member's summary (lowest final objective among members that did not
                  fail) plus ensemble_size, best_member, member_objectives, member_seeds,
                  member_status, failed_members (Jacot et al. 2022's min-over-trials protocol), and
                  members_agreeing: how many finished members end within AGREEMENT (relative) of the best
                  objective, the seed-agreement check where no global certificate exists
  metrics.jsonl   every member's lines, each with `member` and `seed`
  checkpoint.pt   the best member's, in the single-run format, with `best_member`
  analysis/       a copy of the best member's
"""

from __future__ import annotations

import json
import logging
import math
import shutil
from collections.abc import Sequence

from ..rundir import MEMBERS, METRICS, SUMMARY, RunDir, read_metrics

log = logging.getLogger("repcost")
AGREEMENT = 0.01  # members within 1 % of the best objective agree with it


def aggregate(rd: RunDir, cfg_dict: dict, chash: str, seeds: Sequence[int], results: Sequence[dict | Exception]
              ) -> dict:
    """The ensemble's own files from its members' outcomes; returns its summary (or a preempted record).

    A member that could not even start (its directory refused or locked) is an error of the ensemble.
    """
    K = len(seeds)
    preempted = [r for r in results if isinstance(r, dict) and r.get("status") == "preempted"]
    if preempted:
        return {**preempted[0], "ensemble_size": K}
    members = [RunDir(rd.path / MEMBERS / str(i)) for i in range(K)]
    for i, r in enumerate(results):
        if isinstance(r, Exception) and not members[i].file(SUMMARY).exists():
            raise r
    summaries = [members[i].summary() for i in range(K)]
    statuses = [s.get("status", "failed") for s in summaries]
    objectives = [s["objective"] for s in summaries]
    ok = [i for i in range(K) if statuses[i] == "finished"] or list(range(K))
    best = min(ok, key=lambda i: objectives[i] if math.isfinite(objectives[i]) else math.inf)
    failed = [i for i in range(K) if statuses[i] == "failed"]
    top = {**summaries[best], "ensemble_size": K, "best_member": best, "member_objectives": objectives,
           "member_seeds": list(seeds), "member_status": statuses, "failed_members": failed, "config_hash": chash,
           "members_agreeing": sum(statuses[i] == "finished" and objectives[i] <= (1 + AGREEMENT) * objectives[best]
                                   for i in range(K))}
    if (members[best].path / "analysis").is_dir():  # the best member's arrays/tables, where a single run has them
        shutil.copytree(members[best].path / "analysis", rd.path / "analysis", dirs_exist_ok=True)
    if failed and top["status"] != "failed":
        log.warning("ensemble members %s failed (%s); the best member is %d (seed %d)", failed,
                    "; ".join(f"{i}: {summaries[i].get('message', '')}" for i in failed), best, seeds[best])
    lines = [json.dumps({**rec, "member": i, "seed": seeds[i]}) for i, md in enumerate(members)
             if md.file(METRICS).exists() for rec in read_metrics(md.file(METRICS))]  # member by member
    rd.write_bytes(METRICS, ("\n".join(lines) + "\n").encode() if lines else b"")
    ck = members[best].load_checkpoint()
    ck = {**ck, "config_hash": chash, "config": cfg_dict, "status": top["status"], "best_member": best}
    if top["status"] == "failed":
        raise rd.fail(ck, top, f"every ensemble member failed (member 0: {summaries[0].get('message', '')})")
    rd.finish(ck, top, chash)
    return top

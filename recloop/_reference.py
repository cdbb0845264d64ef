"""The key reference of scenario files: every key path the loader accepts
(:func:`scenario_keys`) and the text of ``scenarios/README.md`` (:func:`reference_markdown`),
both read from the declarations the validator uses (:mod:`recloop._validate`,
:mod:`recloop._worlds`, the registry's kinds), so that the documentation cannot drift from
the code (``tests/recloop/test_scenario.py`` checks the file against them)."""

from __future__ import annotations

from recloop._plugins import PYTHON_KIND
from recloop._registry import registry
from recloop._toml import toml_value
from recloop._validate import (
    AGENT_KEYS,
    EVALUATION_KEYS,
    PYTHON_AGENT_KEYS,
    RUN_PARAMS,
    WORLD_KEYS,
)
from recloop._worlds import campaign_params, world_params

__all__ = ["reference_markdown", "scenario_keys"]


def scenario_keys() -> list[str]:
    """Every key path the loader accepts, e.g. ``evaluations.selfcheck.n``."""
    keys = [f"run.{p.name}" for p in RUN_PARAMS]
    keys += [f"agents.{p.name}" for p in AGENT_KEYS]
    keys += [f"evaluations.{p.name}" for p in EVALUATION_KEYS]
    keys += [f"world.{p.name}" for p in WORLD_KEYS]
    keys += [f"world.{p.name}" for p in world_params()]
    keys += [f"world.campaigns.{p.name}" for p in campaign_params()]
    keys += [f"agents.{PYTHON_KIND}.{p.name}" for p in PYTHON_AGENT_KEYS]
    for kind in _builtin("agents"):
        keys += [f"agents.{kind.name}.{p.name}" for p in kind.params or ()]
    for kind in _builtin("evaluations"):
        keys += [f"evaluations.{kind.name}.{p.name}" for p in kind.params]
    return keys


def _builtin(table: str) -> list:
    """The built-in kinds of a registry table (the documented ones; plugins vary by
    installation)."""
    return [k for k in getattr(registry(), table).values() if k.origin == "built-in"]


_README_HEAD = """\
# Scenario files

A scenario is a TOML file: what world to simulate, which agents act in it, and which
evaluations to run. `recloop validate FILE` checks it, `recloop run FILE` runs it (a built-in
scenario also by name: `recloop run quickstart`; `recloop list` shows them).

```toml
[run]
name = "my_study"            # run directory: runs/my_study
replicates = 3               # seeds 0, 1, 2 (or: seeds = [7, 11, 13])

[[agents]]
name = "a"
kind = "fixed_arm"
arm = 1

[[evaluations]]
kind = "selfcheck"
n = 1000
sweep = { n_arms = [2, 10] } # one cell per value (cartesian product over keys)
```

**Cells.** A run is cut into cells: seeds x evaluations x sweep values, and x agents for the
evaluation kinds marked *per agent* (the others run all their agents together on one world,
so that they meet the same users and draws). Cell `c` of seed `s` draws its random streams
from `SeedSequence(s, spawn_key=hash(evaluation name, swept values))`: results do not depend
on worker count or executor, and agents of the same replicate share the world (common random
numbers).

**Validation.** Every problem is reported at once as `FILE: key.path: expected ..., got ...`
(unknown keys get the closest valid key suggested); `recloop` exits with code 2 and creates
nothing. A parameter may be set in the evaluation table or swept in its `sweep` table, not
both. A scenario file is a regular UTF-8 file of at most 4 MiB (a FIFO, a device or a larger
file is refused unread). Rules that involve several keys (`k` at most the world's items, a
synthetic rating set that fits its shape, ...) are checked here too, not by the run.

**Memory.** `recloop run` estimates the peak memory of each evaluation's largest cell from
the sizes that drive it (e.g. `world.n_items x world.dim` item features) and refuses a run
whose cells need more than the machine has available, naming those keys; `--force` runs it
anyway, `recloop run --dry-run` prints the estimates.

The tables below list every key the loader accepts, with its type, range and default
(*required* when there is none). This file is checked against the loader by
`tests/recloop/test_scenario.py`; regenerate the tables with
`python -c "from recloop._scenario import reference_markdown as r; print(r())"`.
"""


def _param_table(params, none_text: str = "*derived*") -> list[str]:
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for p in params:
        if p.required:
            default = "*required*"
        elif p.default is None:
            default = none_text
        else:
            default = f"`{toml_value(p.default)}`"
        rows.append(f"| `{p.name}` | {p.type.describe()} | {default} | {p.doc} |")
    return rows


def reference_markdown() -> str:
    """The text of ``scenarios/README.md``: every key, type, range and default."""
    out = [_README_HEAD, "## Tables", "", "### `run`", "", "The `[run]` table.", ""]
    out += _param_table(RUN_PARAMS)
    out += ["", "### `world`", "", "The `[world]` table (needed by evaluation kinds that "
            "simulate a world).", ""]
    out += _param_table(WORLD_KEYS[:1]) + _param_table(WORLD_KEYS[1:] + world_params(),
                                                       none_text="the preset's")[2:]
    if campaign_params():
        out += ["", "### `world.campaigns`", "", "Each `[[world.campaigns]]` table.", ""]
        out += _param_table(campaign_params())
    out += ["", "### `agents`", "", "Each `[[agents]]` table: these keys, plus the keys of "
            "its kind (below).", ""]
    out += _param_table(AGENT_KEYS)
    out += ["", "### `evaluations`", "", "Each `[[evaluations]]` table: these keys, plus the "
            "keys of its kind (below).", ""]
    out += _param_table(EVALUATION_KEYS)
    out += ["", "## Agent kinds", ""]
    out += [f"### `agents.{PYTHON_KIND}`", "", f"`kind = \"{PYTHON_KIND}\"`: your own agent "
            "(a bandit policy or a recommender), built by a class or function named by import "
            "path and checked with `agents.check_agent` when the scenario is validated. "
            "Installed packages may also declare agent kinds under the entry-point group "
            "`recloop.agents`; they are named by `kind` like the built-ins below (their "
            "keyword arguments as keys of the agent table) and `recloop list` shows them.", ""]
    out += _param_table(PYTHON_AGENT_KEYS)
    out.append("")
    for kind in _builtin("agents"):
        out += [f"### `agents.{kind.name}`", "", f"`kind = \"{kind.name}\"` ({kind.family} "
                f"agent): {kind.summary}", ""]
        out += _param_table(kind.params) if kind.params else ["No parameters."]
        out.append("")
    out += ["## Estimator kinds", "", "Names an evaluation's `estimators` list may hold. "
            "Besides these: an import path `\"package.module:attribute\"` (a function called "
            "with the table's `params` as keyword arguments, or a class built with them whose "
            "instances are called), an installed package's entry point of the group "
            "`recloop.estimators`, or a table `{name = ..., factory = ..., params = {...}}` "
            "whose `factory` is any of these and whose `name` labels the results' `variant`. "
            "Static estimators are called `estimator(log, action_dist, *, rng)`, "
            "learning-policy evaluators `evaluator(log, make_agent, *, rng)` (`rng` only when "
            "the signature takes it); each may return an `evaluators.Estimate` or a float, "
            "and is tried once on a small log when the scenario is validated.", ""]
    for kind in _builtin("estimators"):
        out.append(f"- `{kind.name}` ({kind.family}): {kind.summary}")
    out += ["", "## Evaluation kinds", ""]
    for kind in _builtin("evaluations"):
        cells = "one cell per agent" if kind.per_agent else "all its agents in one cell"
        world = "; needs `[world]`" if kind.needs_world else ""
        who = (f"Evaluates {kind.agent_family} agents ({cells}{world})." if kind.agent_family
               else f"Takes no agents{world}.")
        out += [f"### `evaluations.{kind.name}`", "",
                f"`kind = \"{kind.name}\"`: {kind.summary} {who}", ""]
        out += _param_table(kind.params) if kind.params else ["No parameters."]
        out.append("")
    return "\n".join(out).rstrip() + "\n"

"""`kubectl placement ...`: the `placement kube` commands as a kubectl plugin.

kubectl runs any executable named `kubectl-<name>` on the PATH as `kubectl <name>`; installing
this package puts `kubectl-placement` there. It reads what kubectl prints, so the habit fits:

    kubectl get nodes,pods,jobs.batch,clusterqueues,localqueues,resourceflavors -A -o json \\
        | kubectl placement plan
    kubectl placement import -f objects/ -o request.json
    kubectl placement plan -f nodes.json -f jobs/ --format kueue
    kubectl placement export request.json plan.json --format bindings

`-f`/`--filename` name files and folders as kubectl's do; `import` and `plan` without any read
stdin. Everything else is `placement kube`'s (placement.kube.main): the same options, warnings
on stderr, exit code 2 with one line per problem naming the object, the file and the field.
"""

from __future__ import annotations

import sys

from placement.kube import main as kube_main

#: options of `placement kube import/plan/export` that take a value (so that value is not a path)
_VALUED = {"--rack-label", "--block-label", "--pool-label", "--price", "-o", "--output", "--format", "--plan-out",
           "--time-limit", "--workers", "--seed"}

USAGE = """usage: kubectl placement {import,plan,export} [-f PATH]... [options]

  import   Kubernetes objects -> a placement/v1 request
  plan     import, plan and export in one step (default format: a table)
  export   REQUEST PLAN: write a plan back as bindings, patches, Kueue admissions or a table

Objects come from -f/--filename (files or folders, repeatable) or stdin (kubectl get ... -o json).
Run `kubectl placement plan --help` for every option.
"""


def to_kube_args(argv: list[str]) -> list[str]:
    """kubectl's spelling -> `placement kube`'s: `-f X` becomes the path X; no path at all reads stdin."""
    if not argv or argv[0] in ("-h", "--help", "help"):
        return []
    action, rest = argv[0], argv[1:]
    out: list[str] = []
    paths: list[str] = []
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg in ("-f", "--filename") and i + 1 < len(rest):
            paths.append(rest[i + 1])
            i += 2
            continue
        if arg.startswith("--filename="):
            paths.append(arg.split("=", 1)[1])
        elif arg.startswith("-") and arg != "-":
            out.append(arg)
            if arg in _VALUED and i + 1 < len(rest):
                out.append(rest[i + 1])
                i += 1
        else:
            paths.append(arg)
        i += 1
    if action in ("import", "plan") and not paths and "--help" not in out and "-h" not in out:
        paths = ["-"]
    return [action, *paths, *out]


def main(argv: list[str] | None = None) -> int:
    args = to_kube_args(list(sys.argv[1:] if argv is None else argv))
    if not args:
        print(USAGE, end="")
        return 0
    return kube_main(args, prog="kubectl placement")  # usage and errors name the command the user typed


if __name__ == "__main__":
    raise SystemExit(main())

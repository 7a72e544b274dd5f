#!/usr/bin/env python3
"""CPU time (user+sys) of compiling one file of a build, with other -O/-g levels.

  scripts/tu-time.py BUILD/compile_commands.json FILE_SUFFIX ["-O2 -g" "-O1 -g1" ...]

Compiles the first entry whose file ends in FILE_SUFFIX once per variant (its -O/-g
replaced by the variant), under nice -n 19, into a scratch object, and prints user+sys:
CPU time, because wall time on a shared machine says little. Set CCACHE_DISABLE=1 when
the build uses ccache.
"""
import json, os, shlex, subprocess, sys, tempfile

cc = json.load(open(sys.argv[1]))
entry = next(e for e in cc if e["file"].endswith(sys.argv[2]))
base = shlex.split(entry["command"])
base[base.index("-o") + 1] = os.path.join(tempfile.gettempdir(), "tu-time.o")
for variant in sys.argv[3:] or ["-O2 -g"]:
    cmd = [c for c in base if c not in ("-O0", "-O1", "-O2", "-O3", "-g", "-g1")]
    cmd = cmd[:1] + shlex.split(variant) + cmd[1:]
    r = subprocess.run(["/usr/bin/time", "-f", "%U %S", "nice", "-n", "19"] + cmd,
                       cwd=entry["directory"], capture_output=True, text=True)
    user, system = r.stderr.strip().splitlines()[-1].split()
    print(f"{sys.argv[2]} [{variant}] {float(user) + float(system):.2f} s CPU (exit {r.returncode})", flush=True)

#!/usr/bin/python3
"""Renders chat templates as Hugging Face transformers does, with Debian's
python3-jinja2: the independent reference for kvscope's Jinja interpreter.

transformers (src/transformers/utils/chat_template_utils.py) compiles a chat
template in an ImmutableSandboxedEnvironment(trim_blocks=True,
lstrip_blocks=True) with the loopcontrols extension and a {% generation %}
tag that renders its body, replaces the tojson filter with plain json.dumps
(non-ASCII kept, keys in their order) and adds the globals raise_exception
(a TemplateError) and strftime_now (the local time, here a fixed one).

stdin: {"cases": [{"template": str, "vars": {...}, "now": [Y, m, d, H, M, S]}]}
stdout: [{"text": str} | {"error": str}, ...] in the same order.
"""
import datetime
import json
import sys

from jinja2 import nodes
from jinja2.exceptions import TemplateError
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationTag(Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def environment(now):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, loopcontrols])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def raise_exception(message):
        raise TemplateError(message)

    def strftime_now(fmt):
        return now.strftime(fmt)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    cases = json.load(sys.stdin)["cases"]
    out = []
    for case in cases:
        now = datetime.datetime(*case.get("now", [2026, 1, 2, 3, 4, 5]))
        try:
            text = environment(now).from_string(case["template"]).render(**case.get("vars", {}))
            out.append({"text": text})
        except Exception as e:  # the template's own failure is a result to compare
            out.append({"error": type(e).__name__ + ": " + str(e)})
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()

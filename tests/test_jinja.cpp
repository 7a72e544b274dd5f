// The Jinja interpreter against Debian's python3-jinja2 in transformers'
// chat environment (tools/jinja_ref.py): each snippet renders to the same
// bytes, or fails on both sides. Snippets cover the grammar, whitespace
// control, scoping, Python's printing and the filters, tests and methods
// chat templates use.
#include <gtest/gtest.h>

#include "jinja_ref_util.h"
#include "model/chat/jinja.h"

namespace kvscope {
namespace {

using nlohmann::ordered_json;
using testutil::TempDir;

const ordered_json kMessages = ordered_json::parse(R"([
  {"role": "system", "content": "  Be brief.\n"},
  {"role": "user", "content": "Héllo {{ not a tag }} — \"quoted\" 'x'"},
  {"role": "assistant", "content": "Hi!", "tool_calls": [{"function": {"name": "f", "arguments": {"b": 1, "a": [true, null, 2.5]}}}]}
])");

std::vector<std::string> snippets() {
  return {
      // output and Python's str()
      "{{ 1 }}|{{ 1.0 }}|{{ 2.5e-7 }}|{{ 1e16 }}|{{ 123456789.125 }}|{{ none }}|{{ True }}|{{ 'a' }}|{{ x }}",
      "{{ [1, 'a', none, true, 0.5] }}|{{ (1,) }}|{{ () }}|{{ {'k': 'v', 'n': [1]} }}|{{ \"it's\" }}|{{ ['a\\nb'] }}",
      "{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 10 - 2 - "
      "3 }}",
      "{{ 'ab' * 3 }} {{ [1] * 2 }} {{ 'a' ~ 1 ~ none ~ x }} {{ 'x' + 'y' }} {{ [1] + [2] }} {{ -3 }} {{ +3 }}",
      "{{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' != 'b' }} {{ 1 < 2 }} {{ 'b' >= 'a' }} {{ [1, 2] < [1, 3] }} {{ x == none "
      "}}",
      "{{ 'ell' in 'hello' }} {{ 2 in [1, 2] }} {{ 'role' in messages[0] }} {{ 'z' not in 'abc' }} {{ 'a' in x }}",
      "{{ 1 if true else 2 }} {{ 1 if false }}|{{ 'y' if x is defined else 'n' }} {{ none or 'd' }} {{ 0 and 1 }} {{ "
      "'a' and 'b' }}",
      "{{ not x }} {{ not 1 }} {{ not x is defined }} {{ x is not defined and true }}",
      // subscripts, slices, attributes
      "{{ messages[0]['role'] }} {{ messages[0].role }} {{ messages[-1].content }} {{ messages[5] is defined }}",
      "{{ 'abcdef'[1:4] }} {{ 'abcdef'[::-1] }} {{ 'abcdef'[::2] }} {{ [1,2,3,4][-2:] }} {{ [1,2,3][:-1] }} {{ "
      "'héllo'[1] }}",
      "{{ messages[1:]|length }} {{ messages[0].nope is defined }} {{ messages.0.role }}",
      // whitespace control, trim_blocks and lstrip_blocks
      "a\n  {% if true %}\n    b\n  {% endif %}\nc\n",
      "a  {%- if true -%}  b  {%- endif -%}  c",
      "{% for i in [1, 2] %}\n  {{ i }}\n{% endfor %}\n",
      "x {# comment #}\ny\n  {#- c2 -#}  z\n",
      "  {%+ if true %}kept{% endif %}\n  {% if true +%}\nt{% endif %}",
      "{{- '  a  ' -}}\n{{ 'b' }}  \n  {{ 'c' }}",
      "line\r\nnext\r\n",
      // loops, loop variables, scoping, namespaces
      "{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ "
      "loop.length }}{% endfor %}",
      "{% for m in messages %}{{ loop.previtem.role if loop.previtem is defined else '-' }}{{ loop.nextitem is defined "
      "}}{% endfor %}",
      "{% for m in messages if m.role != 'system' %}{{ loop.index }}:{{ m.role }} {% endfor %}",
      "{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}{% for k in {'x': 1} %}{{ k }}{% endfor "
      "%}",
      "{% for i in [] %}x{% else %}empty{% endfor %}{% for c in 'ab' %}{{ c }}{% endfor %}{% for u in x %}u{% endfor "
      "%}",
      "{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% "
      "endfor %}",
      "{% set y = 1 %}{% for i in [1, 2] %}[{{ y }}]{% set y = i %}{% endfor %}{{ y }}",
      "{% set ns = namespace(n=0, s='') %}{% for i in range(1, 4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
      "{% if true %}{% set z = 3 %}{% endif %}{{ z }}{% set a, b = [1, 2] %}{{ a }}{{ b }}",
      "{% set msgs = messages[1:] %}{% for m in msgs %}{{ m.role }}{% endfor %}{% set messages = [] %}{{ "
      "messages|length }}",
      "{% set block %}in {{ 1 + 1 }}{% endset %}[{{ block }}]",
      "{% macro greet(name, p='Hi') %}{{ p }} {{ name }}{% endmacro %}{{ greet('A') }}/{{ greet('B', p='Yo') }}",
      "{% for i in range(3) %}{% for j in range(2) %}{{ i }}{{ j }}{{ loop.index }} {% endfor %}{% endfor %}",
      "{% generation %}gen {{ 1 }}{% endgeneration %}",
      // filters
      "{{ '  x  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 'Ab'|upper }}{{ 'Ab'|lower }}|{{ 'hello world'|title }}|{{ "
      "'hELLO'|capitalize }}",
      "{{ messages|length }} {{ 'héllo'|length }} {{ x|length }} {{ messages|count }} {{ {'a': 1}|length }}",
      "{{ messages|first }}|{{ [1, 2]|last }}|{{ 'abc'|list }}|{{ [3, 1]|reverse|list }}|{{ 'abc'|reverse }}",
      "{{ ['a', 'b']|join(', ') }} {{ messages|join('/', attribute='role') }} {{ [1, 2]|join }}",
      "{{ x|default('d') }} {{ ''|default('e', true) }} {{ none|default('n') }} {{ x|d('dd') }}",
      "{{ messages|selectattr('role', 'equalto', 'user')|list|length }} {{ messages|rejectattr('role', 'eq', "
      "'user')|map(attribute='role')|join(',') }}",
      "{{ [0, 1, 2, '']|select|list }} {{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2]|reject('even')|list }} {{ ['a', "
      "'b']|map('upper')|join }}",
      "{{ {'b': 1, 'a': 2}|items|list }} {{ 'a-b-c'|replace('-', '+') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ '42'|int "
      "+ 1 }} {{ 'x'|int }} {{ 3.9|int }}",
      "{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ [1, 2, 1]|unique|list }}|{{ -3|abs }}|{{ "
      "1|string ~ 2 }}",
      "{{ messages[2].tool_calls[0].function.arguments|tojson }}",
      "{{ messages[2].tool_calls|tojson(indent=4) }}",
      "{{ messages[1].content|tojson }} {{ {'a': [], 'b': {}}|tojson }} {{ 'é\\u0001\\t'|tojson }} {{ [1.5, 1e20, "
      "2.0]|tojson }}",
      // tests
      "{{ 1 is number }} {{ 1.5 is integer }} {{ true is boolean }} {{ 'a' is string }} {{ messages is sequence }} {{ "
      "messages[0] is mapping }}",
      "{{ 'a' is iterable }} {{ 1 is iterable }} {{ x is iterable }} {{ none is none }} {{ 3 is odd }} {{ 4 is even }} "
      "{{ 3 is divisibleby 3 }}",
      "{{ 1 is eq 1 }} {{ 'a' is equalto('a') }} {{ 2 is gt 1 }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ x is "
      "undefined }} {{ range is callable }}",
      // str and dict methods
      "{{ '  a b  '.strip() }}|{{ 'xxa'.lstrip('x') }}|{{ 'a  '.rstrip() }}|{{ ' a  b '.split() }}|{{ "
      "'a,b,,c'.split(',') }}|{{ 'a b c'.split(' ', 1) }}",
      "{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'abc'.upper() }} {{ 'a'.join(['x', 'y']) }} {{ "
      "'abcb'.find('b') }} {{ 'abcb'.count('b') }}",
      "{{ messages[0].get('role') }} {{ messages[0].get('nope', 'dflt') }} {{ messages[0].keys()|list }} {{ "
      "messages[0].values()|list|length }}",
      "{{ '<think>x</think>\\n\\nanswer'.split('</think>')[-1].lstrip('\\n') }} {{ 'x'.replace('x', 'yy') }} {{ "
      "'12'.isdigit() }}",
      // literals and escapes
      "{{ 'a\\tb\\\\c\\'d\\\"e\\u00e9\\x41' }} {{ \"dq\" 'adj' }} {{ 1_000 }} {{ 0.5e1 }}",
      // failures both sides must report
      "{{ x.y }}",
      "{{ 1 + 'a' }}",
      "{{ raise_exception('stop here') }}",
      "{{ x + 1 }}",
      "{{ none.attr }}",
      "{{ [1].append(2) }}",
      "{{ 1 / 0 }}",
      "{{ 'a' < 1 }}",
      "{% for a, b in [1] %}{% endfor %}",
      "{{ strftime_now('%d %b %Y %H:%M') }}",
  };
}

TEST(Jinja, SnippetsRenderAsJinja2Does) {
  TempDir tmp("jinja");
  ordered_json cases = ordered_json::array();
  for (const std::string& s : snippets()) {
    cases.push_back({{"template", s}, {"vars", {{"messages", kMessages}}}});
  }
  const ordered_json ref = testutil::jinja_reference(cases, tmp);
  ASSERT_EQ(ref.size(), cases.size());
  for (size_t k = 0; k < cases.size(); ++k) {
    const ordered_json got = testutil::kvscope_render(cases[k]);
    SCOPED_TRACE("template: " + cases[k]["template"].get<std::string>());
    if (ref[k].contains("error")) {
      EXPECT_TRUE(got.contains("error")) << "Jinja2 fails (" << ref[k]["error"] << ") but kvscope rendered "
                                         << got.dump();
      if (got.contains("error")) {
        EXPECT_EQ(got["error"].get<std::string>().find("does not implement"), std::string::npos) << got.dump();
      }
    } else {
      ASSERT_TRUE(got.contains("text")) << got.dump();
      EXPECT_EQ(got["text"], ref[k]["text"]);
    }
  }
}

TEST(Jinja, UnimplementedConstructsAreRefusedNeverApproximated) {
  for (const char* t : {"{% include 'x' %}", "{% extends 'x' %}", "{% raw %}{% endraw %}", "{{ x|wordcount }}",
                        "{{ 'a'.zfill(3) }}", "{% for x in y recursive %}{% endfor %}", "{{ 'a' % 1 }}",
                        "{{ x is sameas none }}", "{% filter upper %}x{% endfilter %}"}) {
    SCOPED_TRACE(t);
    try {
      auto tpl = chat_template_from_text(t, "tokenizer_config.json", {});
      render_chat_vars(tpl, ordered_json::object(), testutil::fixed_now());
      ADD_FAILURE() << "rendered";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("tokenizer_config.json"), std::string::npos) << msg;
      EXPECT_NE(msg.find("--chat-format chatml|llama3|zephyr|mistral"), std::string::npos) << msg;
    }
  }
}

TEST(Jinja, DeepNestingIsRefusedNotRecursedInto) {
  for (const std::string& t :
       {"{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}",
        "{{ " + std::string(100000, '-') + "1 }}", "{{ " + std::string(50000, '[') + std::string(50000, ']') + " }}",
        std::string(20000, ' ') + [] {
          std::string s;
          for (int k = 0; k < 5000; ++k) s += "{% if true %}";
          return s;
        }()}) {
    try {
      chat_template_from_text(t, "deep", {});
      ADD_FAILURE() << "parsed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("nesting deeper than"), std::string::npos) << e.what();
    }
  }
}

TEST(Jinja, RunawayTemplatesStopWithAnError) {
  for (const char* t :
       {"{% for i in range(100000000) %}{% endfor %}", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        "{% for i in range(2000) %}{{ 'x' * 100000 }}{% endfor %}"}) {
    SCOPED_TRACE(t);
    auto tpl = chat_template_from_text(t, "t", {});
    EXPECT_THROW(render_chat_vars(tpl, ordered_json::object(), testutil::fixed_now()), Error);
  }
}

}  // namespace
}  // namespace kvscope

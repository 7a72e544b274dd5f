// A Jinja2 interpreter for chat templates: the subset Hugging Face models'
// templates use, rendered byte for byte as transformers renders them
// (ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the
// loopcontrols extension and the {% generation %} tag). Checked against
// Debian's python3-jinja2 (tests/test_jinja.cpp, tools/jinja_ref.py).
// What it does not implement throws Unsupported: a template is rendered
// exactly or not at all.
#pragma once

#include <memory>
#include <string>

#include "model/chat/jinja_value.h"

namespace kvscope::jinja {

struct Template;

// Throws Unsupported naming the line and the construct.
std::shared_ptr<const Template> parse(const std::string& source);

// Renders with `globals` (a dict: the template's variables and functions).
// Throws RenderError where Jinja2 raises (undefined values used, type
// errors, raise_exception), Unsupported where this interpreter stops.
std::string render(const Template& t, const Value& globals);

}  // namespace kvscope::jinja

// kvscope: the command line, and (with no subcommand) the window.
#include "app/cli/cli.h"
#ifdef KVSCOPE_GUI
#include "app/gui/gui.h"
#endif

int main(int argc, char** argv) {
  kvscope::AppHooks hooks;  // bench measures the real memory bandwidth
#ifdef KVSCOPE_GUI
  hooks.gui = kvscope::run_gui;
  hooks.render = kvscope::run_render;
#endif
  return kvscope::run_cli(argc, argv, hooks);
}

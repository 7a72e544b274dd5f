// kvscope: the command line, and (with no subcommand) the window.
#include "cli.h"
#ifdef KVSCOPE_GUI
#include "gui.h"
#endif

int main(int argc, char** argv) {
#ifdef KVSCOPE_GUI
  return kvscope::run_cli(argc, argv, {kvscope::run_gui, kvscope::run_render});
#else
  return kvscope::run_cli(argc, argv, {});
#endif
}

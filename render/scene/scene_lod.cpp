#include "render/scene/scene_lod.h"

namespace kvscope {

Columns plan_columns(int n_pos, int max_columns, int detail) {
  Columns c;
  c.n_pos = std::max(0, n_pos);
  if (max_columns <= 0 || c.n_pos <= max_columns) return c;
  // At least one aggregated column and one detailed one (the newest token).
  detail = std::clamp(detail, 1, std::max(1, max_columns - 1));
  const int older = c.n_pos - detail;
  const int room = std::max(1, max_columns - detail);
  int bin = 2;
  while ((older + bin - 1) / bin > room) bin *= 2;
  c.bin = bin;
  c.n_binned = older;
  return c;
}

}  // namespace kvscope

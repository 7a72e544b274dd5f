// Level of detail for long sequences. A view can show a few hundred columns
// of KV stacks, not thousands: past `max_columns` positions the newest
// `detail` positions keep one column each and the older ones are binned into
// aggregated columns of `bin` positions. `bin` is a power of two and the
// bins start at position 0, so a bin's edges stay put while the sequence
// grows (only the last, partial bin fills up); one empty column separates the
// bins from the detailed positions.
//
// An aggregated column shows what its positions hold together: the mean K
// norm, the state of its newest position, and rays carrying the summed
// attention weight of its keys.
#pragma once

#include <algorithm>

namespace kvscope {

struct Columns {
  int n_pos = 0;     // positions drawn, [0, n_pos)
  int bin = 1;       // positions per aggregated column (1: no binning)
  int n_binned = 0;  // positions [0, n_binned) are aggregated; the rest have a column each

  bool binned() const { return n_binned > 0; }
  int n_aggregated() const { return (n_binned + bin - 1) / bin; }
  // Columns drawn (the separating gap not counted).
  int count() const { return n_aggregated() + (n_pos - n_binned); }
  int column(int pos) const { return pos < n_binned ? pos / bin : n_aggregated() + (pos - n_binned); }
  bool aggregated(int col) const { return col < n_aggregated(); }
  // Positions [first(col), end(col)) of a column.
  int first(int col) const { return aggregated(col) ? col * bin : n_binned + (col - n_aggregated()); }
  int end(int col) const { return aggregated(col) ? std::min((col + 1) * bin, n_binned) : first(col) + 1; }
  // Where position `pos` is drawn, in column pitches from position 0's column
  // (the detailed positions sit one gap column right of the bins).
  float slot_of(int pos) const { return static_cast<float>(column(pos)) + (binned() && pos >= n_binned ? 1.0f : 0.0f); }
};

// The columns for `n_pos` positions: one each when they fit in
// `max_columns` (or max_columns <= 0), else the newest `detail` positions
// one each and the rest binned so that count() <= max_columns.
Columns plan_columns(int n_pos, int max_columns, int detail);

}  // namespace kvscope

// amr_model.hpp: the model shared by examples/amr and examples/amr_mpi. A blocks x blocks grid
// of blocks of cells x cells cells, one explicit heat step per update (each cell reads its four
// neighbours of the previous step, across block edges, 0 outside the domain), and a refined
// disc that moves across the grid phase by phase: its blocks cost 4x, and the owners of each
// phase are runs of equal weight in row order.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace amr_model {

/// Owner of each block for `phase` of `phases`, among `owners`; `weight` gets each block's cost.
inline std::vector<std::size_t> partition(std::size_t blocks, std::size_t phases, std::size_t phase, std::size_t owners,
                                          std::vector<int>& weight) {
  const double n = static_cast<double>(blocks);
  const double t = (static_cast<double>(phase) + 0.5) / static_cast<double>(phases);
  const double cx = t * n, cy = t * n, r = n / 4.0;
  weight.assign(blocks * blocks, 1);
  double total = 0;
  for (std::size_t b = 0; b < weight.size(); ++b) {
    const double x = static_cast<double>(b % blocks) + 0.5, y = static_cast<double>(b / blocks) + 0.5;
    if (std::hypot(x - cx, y - cy) < r) weight[b] = 4;
    total += weight[b];
  }
  std::vector<std::size_t> owner(weight.size());
  double acc = 0;
  for (std::size_t b = 0; b < weight.size(); ++b) {
    owner[b] = std::min(owners - 1, static_cast<std::size_t>((acc + weight[b] / 2.0) / total * static_cast<double>(owners)));
    acc += weight[b];
  }
  return owner;
}

/// One step of block b: `from(k)` is block k's array of the previous step, `to` b's next one.
template <class From>
void update(std::size_t blocks, std::size_t cells, std::size_t b, From&& from, double* to) {
  const std::size_t c = cells, n = blocks, bx = b % n, by = b / n;
  const double* u = from(b);
  const auto at = [&](long x, long y) -> double {  // neighbours' edge cells; 0 outside the domain
    long cx = static_cast<long>(bx), cy = static_cast<long>(by);
    const long cl = static_cast<long>(c);
    if (x < 0) x += cl, --cx;
    if (x >= cl) x -= cl, ++cx;
    if (y < 0) y += cl, --cy;
    if (y >= cl) y -= cl, ++cy;
    if (cx < 0 || cy < 0 || cx >= static_cast<long>(n) || cy >= static_cast<long>(n)) return 0.0;
    return from(static_cast<std::size_t>(cy) * n + static_cast<std::size_t>(cx))[static_cast<std::size_t>(y) * c + static_cast<std::size_t>(x)];
  };
  for (std::size_t y = 0; y < c; ++y) {
    const bool edge_row = y == 0 || y + 1 == c;
    for (std::size_t x = 0; x < c; ++x) {
      const double mid = u[y * c + x];
      double sum;
      if (edge_row || x == 0 || x + 1 == c) {
        const long lx = static_cast<long>(x), ly = static_cast<long>(y);
        sum = at(lx - 1, ly) + at(lx + 1, ly) + at(lx, ly - 1) + at(lx, ly + 1);
      } else {
        sum = u[y * c + x - 1] + u[y * c + x + 1] + u[(y - 1) * c + x] + u[(y + 1) * c + x];
      }
      to[y * c + x] = mid + 0.2 * (sum - 4.0 * mid);
    }
  }
}

}  // namespace amr_model

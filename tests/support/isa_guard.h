#pragma once
// Restores the active kernel set (kernels/isa.h) when a test that changes it ends.
#include "specula/kernels/isa.h"

namespace specula::test {

class IsaGuard {
 public:
  IsaGuard() : saved_(active_isa()) {}
  ~IsaGuard() { set_active_isa(saved_); }
  IsaGuard(const IsaGuard&) = delete;
  IsaGuard& operator=(const IsaGuard&) = delete;

 private:
  Isa saved_;
};

}  // namespace specula::test

// passes/Training: the per-step scalars the host computes in double
// (stepScalars) and the learning-rate schedules (ir::LrSchedule).
#include <doctest/doctest.h>

#include <cmath>

#include "passes/Training.h"

using namespace gsl;

namespace {

ir::Optimizer adam(double lr, double b1, double b2) {
  ir::Optimizer o;
  o.kind = ir::Optimizer::Adam;
  o.hp = {{"lr", lr}, {"beta1", b1}, {"beta2", b2}, {"eps", 1e-8}, {"weight_decay", 0.0}, {"clip_norm", 0.0}};
  o.lr.peak = lr;
  return o;
}

using S = ir::TrainRequest::Scalar;

ir::TrainRequest request(std::vector<S> scalars) {
  ir::TrainRequest tr;
  tr.kind = ir::TrainRequest::Minimize;
  tr.scalars = std::move(scalars);
  return tr;
}

}  // namespace

TEST_CASE("Adam's bias corrections are exact in double when beta2 is close to 1") {
  // Issue 15: 1 - pow(f32(0.99999), 1) is 1.0013580e-05, 0.14% away from
  // the 1e-5 the moment update uses; the first step then moved 1.0 to
  // 0.89993215 instead of torch's 0.9.
  auto o = adam(0.1, 0.9, 0.99999);
  auto s = passes::stepScalars(o, request({S::AdamStepSize, S::AdamBc2Sqrt}), 1);
  REQUIRE(s.size() == 2);
  CHECK(s[0] == doctest::Approx(0.1 / 0.1).epsilon(1e-12));
  CHECK(s[1] == doctest::Approx(std::sqrt(1e-5)).epsilon(1e-9));
  // The first update of w = 1 with gradient 2: m = 0.2, v = 4e-5 (f32
  // moments), m / (sqrt(v) / bc2_sqrt + eps) * step_size = 0.1.
  float m = 0.1f * 2.0f, v = (float)(1 - 0.99999) * 4.0f;
  float step = (float)s[0] * (m / (std::sqrt(v) / (float)s[1] + 1e-8f));
  CHECK(1.0f - step == doctest::Approx(0.9).epsilon(1e-7));
  // Later steps: 1 - beta2^t in double.
  auto s50 = passes::stepScalars(o, request({S::AdamBc2Sqrt}), 50);
  CHECK(s50[0] == doctest::Approx(std::sqrt(-std::expm1(50 * std::log1p(-1e-5)))).epsilon(1e-9));
}

TEST_CASE("schedules: warmup, then constant, linear, cosine or inverse square root") {
  ir::LrSchedule s;
  s.peak = 1.0;
  s.warmup = 10;
  CHECK(s.at(1) == doctest::Approx(0.1));
  CHECK(s.at(10) == 1.0);
  CHECK(s.at(1000) == 1.0);
  CHECK_FALSE(s.isConstant());

  s.kind = ir::LrSchedule::Linear;
  s.total = 30;
  s.end = 0.5;
  CHECK(s.at(5) == doctest::Approx(0.5));
  CHECK(s.at(10) == 1.0);
  CHECK(s.at(20) == doctest::Approx(0.75));
  CHECK(s.at(30) == 0.5);
  CHECK(s.at(31) == 0.5);

  s.kind = ir::LrSchedule::Cosine;
  s.end = 0;
  CHECK(s.at(10) == doctest::Approx(1.0));
  CHECK(s.at(20) == doctest::Approx(0.5));
  CHECK(s.at(29) == doctest::Approx(0.5 * (1 + std::cos(M_PI * 19.0 / 20.0))));
  CHECK(s.at(40) == 0.0);

  s.kind = ir::LrSchedule::Rsqrt;
  s.warmup = 4;
  CHECK(s.at(2) == doctest::Approx(0.5));
  CHECK(s.at(4) == 1.0);
  CHECK(s.at(16) == doctest::Approx(0.5));
}

TEST_CASE("the host scalars follow the request's order") {
  auto o = adam(0.01, 0.9, 0.999);
  o.kind = ir::Optimizer::AdamW;
  o.hp["weight_decay"] = 0.1;
  o.lr.kind = ir::LrSchedule::Constant;
  o.lr.warmup = 4;
  auto s = passes::stepScalars(o, request({S::DecayRate, S::Lr, S::AdamStepSize}), 2);
  REQUIRE(s.size() == 3);
  CHECK(s[0] == doctest::Approx(0.005 * 0.1));
  CHECK(s[1] == doctest::Approx(0.005));
  CHECK(s[2] == doctest::Approx(0.005 / (1 - 0.81)));
}

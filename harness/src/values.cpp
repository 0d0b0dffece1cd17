// SPDX-License-Identifier: Apache-2.0
// The values file of `crossfire replay --values` (values.hpp; schema in docs/program-format.md).
#include "crossfire/harness/values.hpp"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "crossfire/harness/model.hpp"

namespace crossfire::harness {
namespace {

using nlohmann::json;

// A number as JSON: finite values as numbers (nlohmann writes the shortest text that reads back to the same
// double, and -0.0 as -0.0), the others as the strings "nan", "inf" and "-inf", which JSON has no numbers for.
json number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

json numbers(const std::vector<double>& v) {
  json a = json::array();
  for (double x : v) a.push_back(number(x));
  return a;
}

json tensor(const reference::RefTensor& t) {
  return {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape.dims()}, {"values", numbers(t.values)}};
}

const char* status_name(NodeStatus s) {
  switch (s) {
    case NodeStatus::ok: return "ok";
    case NodeStatus::failed: return "failed";
    case NodeStatus::unsupported: return "unsupported";
    case NodeStatus::missing: return "missing";
  }
  return "?";
}

// One node on one device: its output, and the reference on that device's own inputs with the bound per element.
json node_entry(const Program& p, size_t v, const RunResult& run, const Device& d) {
  const NodeRecord& rec = run.nodes[v];
  const OpDef& op = op_def(p.values[v].node().op);
  json e{{"id", v}, {"op", op.name}, {"device", d.str()}, {"status", status_name(rec.status)}};
  if (rec.error) e["error"] = rec.error->message;
  if (rec.used_standin) e["used_standin"] = true;
  if (rec.status != NodeStatus::ok || !rec.output) return e;
  e["output"] = tensor(*rec.output);
  if (!rec.ref_call) return e;
  try {
    const reference::RefResult exact = reference::evaluate(*rec.ref_call);
    const ErrorBound bound = reference::bound_for(op, exact.value.dtype);
    const Backend* b = find_backend(d);
    const bool own = b != nullptr && b->accumulates_in_dtype(p.values[v].node().op, exact.value.dtype);
    std::vector<double> allowed;
    for (size_t i = 0; i < exact.magnitude.size(); ++i)
      allowed.push_back(reference::allowed_error(bound, exact.value.dtype, exact.magnitude[i], exact.terms[i], own));
    e["reference"] = tensor(exact.value);
    e["magnitude"] = numbers(exact.magnitude);
    e["terms"] = exact.terms;
    e["allowed"] = numbers(allowed);
    e["overflow"] = reference::float_format(exact.value.dtype).overflow;  // the smallest |x| rounding to infinity
    e["bound"] = {{"k_const", op.bound.k_const}, {"k_per_term", op.bound.k_per_term}, {"bitwise", bound.bitwise},
                  {"same_bits", moves_data(op.family)}, {"accumulates_in_dtype", own}};
    if (auto m = reference::first_mismatch(op, exact, *rec.output, own))
      e["verdict"] = {{"ok", false}, {"element", m->index}, {"why", m->what}};
    else
      e["verdict"] = {{"ok", true}};
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& ex) {
    e["verdict"] = {{"ok", nullptr}, {"why", fmt::format("no reference: {}", ex.what())}};
  }
  return e;
}

}  // namespace

std::string values_json(const Program& p, const CheckOptions& opts) {
  Deadline deadline(opts.deadline);
  const std::vector<Device> devices = opts.devices.empty() ? available_devices() : opts.devices;
  json out{{"schema", "crossfire-values/1"}, {"program", print_program(p)}, {"devices", json::array()},
           {"values", json::array()}};
  for (const Device& d : devices) {
    out["devices"].push_back(d.str());
    const RunResult run = run_on_device(p, d);
    for (size_t v = 0; v < p.values.size(); ++v) {
      if (p.values[v].is_input()) {
        json e{{"id", v}, {"op", "input"}, {"device", d.str()}, {"status", "ok"}};
        if (run.tensors[v].defined()) e["output"] = tensor(reference::RefTensor::from(run.tensors[v]));
        out["values"].push_back(std::move(e));
        continue;
      }
      out["values"].push_back(node_entry(p, v, run, d));
    }
  }
  return out.dump(1) + "\n";
}

}  // namespace crossfire::harness

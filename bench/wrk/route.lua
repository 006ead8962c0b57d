-- wrk script for `placement bench route`: POST /v1/route at a fixed rate.
--   wrk -t T -c C -d D -s route.lua URL -- BODIES RATE_PER_THREAD KEY
-- BODIES: a file of request bodies, one JSON a line, sent in turn. Each thread keeps its own
-- schedule (one request every 1/RATE_PER_THREAD s on whichever of its connections is free):
-- a request is sent when due, or at once when behind, so the rate holds whatever the latency.
-- wrk times each request from its send to its answer; done() prints one line of JSON.
local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } placement_timespec;
int clock_gettime(int clk_id, placement_timespec *tp);
]]
local CLOCK_MONOTONIC = 1
local ts = ffi.new("placement_timespec[1]")

local function now_ms()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
  return tonumber(ts[0].tv_sec) * 1000.0 + tonumber(ts[0].tv_nsec) / 1e6
end

local requests = {}
local next_request = 0
local interval_ms = 1.0
local due_ms = nil

function init(args)
  local headers = {
    ["Content-Type"] = "application/json",
    ["Authorization"] = "Bearer " .. args[3],
  }
  for line in io.lines(args[1]) do
    requests[#requests + 1] = wrk.format("POST", "/v1/route", headers, line)
  end
  interval_ms = 1000.0 / tonumber(args[2])
end

function request()
  next_request = next_request % #requests + 1
  return requests[next_request]
end

function delay()
  local now = now_ms()
  if due_ms == nil then
    due_ms = now
  end
  due_ms = due_ms + interval_ms
  local wait = due_ms - now
  if wait < 1.0 then
    return 0
  end
  return wait
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "duration_us": %d, "non_2xx": %d, "socket_errors": %d, '
      .. '"p50_us": %d, "p99_us": %d, "p999_us": %d, "max_us": %d}\n',
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max))
end

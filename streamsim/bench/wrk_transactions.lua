-- wrk script for POST /v1/transactions (`streamsim bench api --generator wrk|both`).
-- Arguments (after `--`): an id prefix, then a file of JSON bodies, one a line, each with
-- "@ID@" where its transaction_id goes and @TS@ where its event time (ms) goes. Every request
-- gets a fresh transaction_id (prefix-thread-n), so the endpoint decides each one.
-- done() prints one line "WRK_JSON {...}": requests, duration, errors and latency percentiles
-- (microseconds), for streamsim.bench.wrk to parse.

local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("tid", #threads)
end

function init(args)
  prefix = args[1] .. "-" .. tid .. "-"
  bodies = {}
  for line in io.lines(args[2]) do
    bodies[#bodies + 1] = line
  end
  n = 0
  headers = { ["Content-Type"] = "application/json" }
end

function request()
  n = n + 1
  local body = bodies[(n % #bodies) + 1]
  body = body:gsub("@ID@", prefix .. n, 1):gsub("@TS@", tostring(os.time() * 1000), 1)
  return wrk.format("POST", wrk.path, headers, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,' ..
    '"status":%d,"timeout":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end

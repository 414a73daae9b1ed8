# frozen_string_literal: true

# Sidekiq's side of bench/run_peers.py (bench/peers/sidekiq_bench.py drives it; Debian's ruby-sidekiq).
#
#   sidekiq -r ./sidekiq_bench.rb -c 10     the worker: Sidekiq's own CLI, which requires this file
#   ruby sidekiq_bench.rb produce           the producer: reads `enqueue N`, `bulk N` or `probe` lines on stdin,
#                                           answers each with one JSON line (see _common.py ForeignProducer)
#
# The job body is the harness's (bench/peers/_common.py record_job): one INCR; the marked completions one SET of
# the time; a latency probe RPUSHes its pick-up delay instead.
require "json"
require "connection_pool"
require "sidekiq"

URL = ENV.fetch("BENCH_REDIS_URL")
MARKS = ENV.fetch("BENCH_MARK_AT", "").split(",").map(&:to_i)
TASK_SLEEP_S = ENV.fetch("BENCH_TASK_SLEEP_MS", "0").to_f / 1000
BULK_BATCH = 1000

Sidekiq.configure_client { |config| config.redis = { url: URL } }
Sidekiq.configure_server { |config| config.redis = { url: URL } }
# Sidekiq logs every job's start and end at INFO; the harness runs every system at WARNING.
Sidekiq.logger.level = Logger::WARN
# Debian pairs Sidekiq 6.4.1 with redis-rb 4.8, which warns on stderr at every push (SADD's return type) and every
# fetch (BRPOP's positional timeout); Sidekiq 6.5 stopped both. Its integer SADD, and no warnings printed.
Redis.sadd_returns_boolean = false
Redis.silence_deprecations = true

# The task's own connections, apart from Sidekiq's (as the Python tasks have their own redis-py client).
STAMPS = ConnectionPool.new(size: 10) { Redis.new(url: URL) }

class BenchJob
  include Sidekiq::Job

  def perform(params)
    started = Time.now.to_f
    STAMPS.with do |redis|
      if (t_enq = params["t_enq"])
        redis.rpush("bench:latency", (started - t_enq).to_s)
        next
      end
      sleep(TASK_SLEEP_S) if TASK_SLEEP_S.positive?
      done = redis.incr("bench:counter")
      redis.set("bench:mark:#{done}", Time.now.to_f.to_s) if MARKS.include?(done)
    end
  end
end

def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)
def cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)

def timed
  t0 = monotonic
  c0 = cpu
  yield
  JSON.generate({ elapsed_s: monotonic - t0, cpu_s: cpu - c0 })
end

def produce
  payload = JSON.parse(ENV.fetch("BENCH_PAYLOAD_JSON"))
  $stdout.sync = true
  Sidekiq.redis(&:ping)
  puts JSON.generate({ ready: true })
  $stdin.each_line do |line|
    command, count = line.split
    n = count.to_i
    case command
    when "enqueue"
      puts(timed { n.times { BenchJob.perform_async(payload) } })
    when "bulk"
      puts(timed do
        (0...n).step(BULK_BATCH) do |start|
          size = [BULK_BATCH, n - start].min
          Sidekiq::Client.push_bulk("class" => BenchJob, "args" => Array.new(size) { [payload] })
        end
      end)
    when "probe"
      t0 = monotonic
      BenchJob.perform_async(payload.merge("t_enq" => Time.now.to_f))
      puts JSON.generate({ call_s: monotonic - t0 })
    else
      abort "unknown command: #{line}"
    end
  end
end

produce if $PROGRAM_NAME == __FILE__ && ARGV.first == "produce"

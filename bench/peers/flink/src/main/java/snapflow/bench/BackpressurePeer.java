package snapflow.bench;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.CheckpointConfig;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;

/**
 * The Flink side of bench/backpressure-comparison: snapflow's benchmark shape (an unlimited
 * sequence source -> keyBy running sum -> identity maps -> a throttled sink, every operator its
 * own task at the same parallelism) on a MiniCluster, with aligned checkpoints, unaligned ones,
 * or aligned ones that switch to unaligned after a timeout. Prints one JSON object.
 *
 * <pre>
 *   backpressure --parallelism P --depth D --interval-ms I --sink-delay-us U
 *                [--unaligned true|false] [--aligned-timeout-ms T] [--checkpoints N]
 *                [--warmup-checkpoints W] [--warmup-seconds S] [--seconds S]
 *                [--checkpoint-timeout-ms T] [--keys K] [--checkpoint-dir FOLDER]
 * </pre>
 *
 * The throttled sink parks its thread U microseconds per record (LockSupport.parkNanos, a timed
 * sleep as snapflow's discard_sink delay_us_per_record is; the machine's timer slack adds to
 * both alike) and then drops it: a map chained with a DiscardingSink, so the sink is one task
 * as snapflow's. With U far below the source's rate every buffer upstream fills.
 *
 * The measurement starts after W completed checkpoints (or S warm-up seconds when the interval
 * is longer than the window) and lasts until N checkpoints triggered after its start ended,
 * completed or failed, or at most --seconds. Per checkpoint: Flink's REST end_to_end_duration
 * (trigger -> latest acknowledgement, ms), trigger -> completed timed in this JVM from the
 * coordinator's log calls (CheckpointLog), persisted_data and processed_data (bytes of in-flight
 * data written into the checkpoint, and processed during alignment), checkpoint_type, and how
 * many subtasks took their checkpoint unaligned (the subtask details' unaligned_checkpoint).
 * Records/s through the sink over the window, from the sink's own counter.
 */
public final class BackpressurePeer {
  static final LongAdder SINK_RECORDS = new LongAdder();

  /** Sleeps the configured delay per record, counts it and passes it on to the discarding sink. */
  static final class Throttle implements MapFunction<Tuple2<Long, Long>, Tuple2<Long, Long>> {
    private final long delayNanos;

    Throttle(long delayUs) {
      this.delayNanos = delayUs * 1000L;
    }

    @Override
    public Tuple2<Long, Long> map(Tuple2<Long, Long> r) {
      if (delayNanos > 0) LockSupport.parkNanos(delayNanos);
      SINK_RECORDS.increment();
      return r;
    }
  }

  static final class Options {
    int parallelism = 4;
    int depth = 3;
    long intervalMs = 1000;
    long sinkDelayUs = 0;
    boolean unaligned = false;
    long alignedTimeoutMs = -1;  // -1: not set (Flink's default: none)
    int checkpoints = 10;
    int warmupCheckpoints = 1;
    double warmupSeconds = 2;
    double seconds = 120;
    long checkpointTimeoutMs = 600_000;
    int keys = 16;
    String checkpointParent = null;
  }

  static Options parse(String[] args) {
    Options o = new Options();
    for (int i = 1; i < args.length; i += 2) {
      if (i + 1 >= args.length) usage("missing value for " + args[i]);
      String v = args[i + 1];
      try {
        switch (args[i]) {
          case "--parallelism" -> o.parallelism = Integer.parseInt(v);
          case "--depth" -> o.depth = Integer.parseInt(v);
          case "--interval-ms" -> o.intervalMs = Long.parseLong(v);
          case "--sink-delay-us" -> o.sinkDelayUs = Long.parseLong(v);
          case "--unaligned" -> o.unaligned = parseBoolean(args[i], v);
          case "--aligned-timeout-ms" -> o.alignedTimeoutMs = Long.parseLong(v);
          case "--checkpoints" -> o.checkpoints = Integer.parseInt(v);
          case "--warmup-checkpoints" -> o.warmupCheckpoints = Integer.parseInt(v);
          case "--warmup-seconds" -> o.warmupSeconds = Double.parseDouble(v);
          case "--seconds" -> o.seconds = Double.parseDouble(v);
          case "--checkpoint-timeout-ms" -> o.checkpointTimeoutMs = Long.parseLong(v);
          case "--keys" -> o.keys = Integer.parseInt(v);
          case "--checkpoint-dir" -> o.checkpointParent = v;
          default -> usage("unknown option " + args[i]);
        }
      } catch (NumberFormatException e) {
        usage(args[i] + " needs a number, got '" + v + "'");
      }
    }
    if (o.parallelism < 1 || o.parallelism > 256) usage("--parallelism must be 1..256");
    if (o.depth < 3 || o.depth > 32) usage("--depth must be 3..32");
    if (o.intervalMs < 10) usage("--interval-ms must be >= 10");
    if (o.sinkDelayUs < 0 || o.sinkDelayUs > 1_000_000) usage("--sink-delay-us must be 0..1000000");
    if (o.alignedTimeoutMs < -1) usage("--aligned-timeout-ms must be >= 0 (or -1: not set)");
    if (o.alignedTimeoutMs >= 0 && !o.unaligned)
      usage("--aligned-timeout-ms needs --unaligned true (Flink switches to unaligned after it)");
    if (o.checkpoints < 0 || o.warmupCheckpoints < 0) usage("checkpoint counts must be >= 0");
    if (o.warmupSeconds < 0 || o.warmupSeconds > 600) usage("--warmup-seconds must be 0..600");
    if (o.seconds <= 0 || o.seconds > 3600) usage("--seconds must be in (0, 3600]");
    if (o.checkpointTimeoutMs < 10) usage("--checkpoint-timeout-ms must be >= 10");
    if (o.keys < 1) usage("--keys must be >= 1");
    return o;
  }

  static boolean parseBoolean(String name, String v) {
    if (v.equals("true")) return true;
    if (v.equals("false")) return false;
    usage(name + " needs true or false, got '" + v + "'");
    return false;
  }

  static void usage(String why) {
    System.err.println("flink-peer backpressure: " + why);
    System.err.println(
        "usage: FlinkPeer backpressure [--parallelism P] [--depth D] [--interval-ms I]"
            + " [--sink-delay-us U] [--unaligned true|false] [--aligned-timeout-ms T]"
            + " [--checkpoints N] [--warmup-checkpoints W] [--warmup-seconds S] [--seconds S]"
            + " [--checkpoint-timeout-ms T] [--keys K] [--checkpoint-dir FOLDER]");
    System.exit(2);
  }

  static JobGraph buildJob(Options o, Configuration conf) {
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
    env.setParallelism(o.parallelism);
    env.enableCheckpointing(o.intervalMs);
    CheckpointConfig cc = env.getCheckpointConfig();
    cc.setCheckpointTimeout(o.checkpointTimeoutMs);
    // A checkpoint that times out under backpressure is counted, not a reason to fail the job.
    cc.setTolerableCheckpointFailureNumber(Integer.MAX_VALUE);
    if (o.unaligned) {
      cc.enableUnalignedCheckpoints();
      // 0 = unaligned from the start; T > 0 = aligned first, unaligned once alignment took T.
      if (o.alignedTimeoutMs >= 0) cc.setAlignedCheckpointTimeout(Duration.ofMillis(o.alignedTimeoutMs));
    }
    final long keys = o.keys;
    DataGeneratorSource<Long> generator =
        new DataGeneratorSource<>(seq -> seq, Long.MAX_VALUE, RateLimiterStrategy.noOp(), Types.LONG);
    DataStream<Long> source =
        env.fromSource(generator, WatermarkStrategy.noWatermarks(), "sequence");
    // One task per operator as snapflow runs them: the keyBy separates the source from the sum,
    // every later stage starts a chain of its own, and the throttle chains with the discarding
    // sink into one sink task.
    DataStream<Tuple2<Long, Long>> stream =
        source.keyBy(seq -> seq % keys, Types.LONG)
            .map(new FlinkPeer.KeyedSum(0, keys))
            .returns(Types.TUPLE(Types.LONG, Types.LONG))
            .name("sum");
    for (int i = 0; i < o.depth - 3; ++i)
      stream =
          stream.map(new FlinkPeer.Identity())
              .returns(Types.TUPLE(Types.LONG, Types.LONG))
              .startNewChain()
              .name("map" + (i + 1));
    stream.map(new Throttle(o.sinkDelayUs))
        .returns(Types.TUPLE(Types.LONG, Types.LONG))
        .startNewChain()
        .name("throttle")
        .sinkTo(new DiscardingSink<>())
        .name("sink");
    return env.getStreamGraph().getJobGraph();
  }

  public static void main(String[] args) throws Exception {
    Options o = parse(args);
    Path checkpoints =
        o.checkpointParent == null
            ? Files.createTempDirectory("flink-peer-")
            : Files.createTempDirectory(Path.of(o.checkpointParent), "flink-peer-");
    FlinkPeer.Options base = new FlinkPeer.Options();
    base.parallelism = o.parallelism;
    Configuration conf = FlinkPeer.configuration(base, checkpoints);
    MiniCluster cluster =
        new MiniCluster(
            new MiniClusterConfiguration.Builder()
                .setConfiguration(conf)
                .setNumTaskManagers(1)
                .setNumSlotsPerTaskManager(o.parallelism)
                .build());
    String json;
    try {
      cluster.start();
      json = measure(o, conf, cluster);
    } finally {
      cluster.close();
      FlinkPeer.deleteTree(checkpoints);
    }
    System.out.println(json);
    System.out.flush();
    System.exit(0);  // the MiniCluster leaves non-daemon threads behind on some versions
  }

  /** One checkpoint as the REST history shows it. */
  record Entry(long id, String status, long e2eMs, long persisted, long processed, String type) {}

  static String measure(Options o, Configuration conf, MiniCluster cluster) throws Exception {
    JobID id = cluster.submitJob(buildJob(o, conf)).get().getJobID();
    URI rest = cluster.getRestAddress().get();
    HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    ObjectMapper mapper = new ObjectMapper();
    TreeMap<Long, Entry> seen = new TreeMap<>();
    // Warm-up: W completed checkpoints, or some seconds when checkpoints are rare (bounded).
    long warmDeadline = System.nanoTime() + 300_000_000_000L;
    boolean checkpointsInWindow = o.intervalMs <= o.seconds * 1000;
    long warmUntil = System.nanoTime() + (long) (o.warmupSeconds * 1e9);
    while (true) {
      if (System.nanoTime() > warmDeadline)
        throw new IllegalStateException("the warm-up did not end within 300 s of submission");
      Thread.sleep(100);  // polling interval of the REST statistics, not synchronisation
      poll(http, mapper, rest, id, seen);
      long done = seen.values().stream().filter(e -> e.status.equals("COMPLETED")).count();
      boolean warm =
          checkpointsInWindow && o.warmupCheckpoints > 0
              ? done >= o.warmupCheckpoints
              : System.nanoTime() >= warmUntil && SINK_RECORDS.sum() > 0;
      if (warm) break;
    }
    final long before = seen.isEmpty() ? 0 : seen.lastKey();
    long records0 = SINK_RECORDS.sum();
    long t0 = System.nanoTime();
    long deadline = t0 + (long) (o.seconds * 1e9);
    boolean reached = o.checkpoints == 0;
    while (System.nanoTime() < deadline) {
      Thread.sleep(100);  // polling interval of the REST statistics, not synchronisation
      poll(http, mapper, rest, id, seen);
      if (o.checkpoints > 0 && ended(seen, before) >= o.checkpoints) {
        reached = true;
        break;
      }
    }
    long records1 = SINK_RECORDS.sum();
    double windowS = (System.nanoTime() - t0) / 1e9;
    poll(http, mapper, rest, id, seen);
    List<Entry> window = new ArrayList<>();
    for (Entry e : seen.tailMap(before, false).values()) {
      if (e.status.equals("IN_PROGRESS")) continue;
      if (o.checkpoints > 0 && window.size() >= o.checkpoints) break;
      window.add(e);
    }
    StringBuilder list = new StringBuilder("[");
    for (Entry e : window) {
      int[] unaligned = e.status.equals("COMPLETED") ? unalignedSubtasks(http, mapper, rest, id, e.id)
                                                     : new int[] {-1, -1};
      Long timedTrigger = CheckpointLog.TRIGGER_NS.get(e.id);
      Long timedDone = CheckpointLog.COMPLETED_NS.get(e.id);
      String timed = timedTrigger != null && timedDone != null
          ? String.format(Locale.ROOT, "%.3f", (timedDone - timedTrigger) / 1e6) : "null";
      if (list.length() > 1) list.append(',');
      list.append(String.format(Locale.ROOT,
          "{\"id\":%d,\"status\":\"%s\",\"end_to_end_ms\":%d,\"to_completion_timed_ms\":%s,"
              + "\"persisted_data\":%d,\"processed_data\":%d,\"checkpoint_type\":\"%s\","
              + "\"unaligned_subtasks\":%d,\"subtasks\":%d}",
          e.id, e.status, e.e2eMs, timed, e.persisted, e.processed, e.type, unaligned[0],
          unaligned[1]));
    }
    list.append(']');
    cluster.cancelJob(id).get();
    return String.format(
        Locale.ROOT,
        "{\"system\":\"flink\",\"mode\":\"backpressure\",\"flink_version\":\"%s\","
            + "\"parallelism\":%d,\"depth\":%d,\"interval_ms\":%d,\"sink_delay_us\":%d,"
            + "\"unaligned\":%b,\"aligned_timeout_ms\":%d,\"window_s\":%.3f,"
            + "\"reached_checkpoints\":%b,\"sink_records_per_s\":%.1f,\"checkpoints\":%s}",
        org.apache.flink.runtime.util.EnvironmentInformation.getVersion(), o.parallelism,
        o.depth, o.intervalMs, o.sinkDelayUs, o.unaligned, o.alignedTimeoutMs, windowS, reached,
        windowS > 0 ? (records1 - records0) / windowS : 0.0, list);
  }

  /** Checkpoints after `before` that ended, completed or failed. */
  static long ended(TreeMap<Long, Entry> seen, long before) {
    return seen.tailMap(before, false).values().stream()
        .filter(e -> !e.status.equals("IN_PROGRESS"))
        .count();
  }

  /** Adds or updates the checkpoints of the REST history (bounded by its size). */
  static void poll(HttpClient http, ObjectMapper mapper, URI rest, JobID id,
                   TreeMap<Long, Entry> seen) throws InterruptedException, IOException {
    JsonNode root = get(http, mapper, rest, "/jobs/" + id + "/checkpoints");
    if (root == null) return;  // a slow answer on a loaded machine: the next poll reads again
    for (JsonNode h : root.path("history")) {
      if (h.path("is_savepoint").asBoolean(false)) continue;
      long cid = h.path("id").asLong();
      Entry old = seen.get(cid);
      if (old != null && !old.status.equals("IN_PROGRESS")) continue;
      seen.put(cid, new Entry(cid, h.path("status").asText(), h.path("end_to_end_duration").asLong(),
          h.path("persisted_data").asLong(0), h.path("processed_data").asLong(0),
          h.path("checkpoint_type").asText("")));
    }
  }

  /** {subtasks that took checkpoint `cid` unaligned, subtasks reported}, or {-1, -1}. */
  static int[] unalignedSubtasks(HttpClient http, ObjectMapper mapper, URI rest, JobID id, long cid)
      throws InterruptedException, IOException {
    String base = "/jobs/" + id + "/checkpoints/details/" + cid;
    JsonNode details = get(http, mapper, rest, base);
    if (details == null) return new int[] {-1, -1};
    int unaligned = 0, subtasks = 0;
    for (Iterator<Map.Entry<String, JsonNode>> it = details.path("tasks").fields(); it.hasNext(); ) {
      String vertex = it.next().getKey();
      JsonNode per = get(http, mapper, rest, base + "/subtasks/" + vertex);
      if (per == null) return new int[] {-1, -1};
      for (JsonNode s : per.path("subtasks")) {
        if (!s.has("unaligned_checkpoint")) continue;  // a subtask that did not acknowledge
        ++subtasks;
        if (s.path("unaligned_checkpoint").asBoolean(false)) ++unaligned;
      }
    }
    return new int[] {unaligned, subtasks};
  }

  static JsonNode get(HttpClient http, ObjectMapper mapper, URI rest, String path)
      throws InterruptedException, IOException {
    HttpRequest request =
        HttpRequest.newBuilder(rest.resolve(path)).timeout(Duration.ofSeconds(30)).GET().build();
    HttpResponse<String> response;
    try {
      response = http.send(request, HttpResponse.BodyHandlers.ofString());
    } catch (IOException e) {
      return null;
    }
    if (response.statusCode() != 200) return null;
    return mapper.readTree(response.body());
  }
}

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
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.CheckpointListener;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobmaster.JobResult;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;

/**
 * The Flink side of bench/run-comparison: snapflow's benchmark pipeline (sequence source ->
 * keyBy running sum -> identity maps -> discarding sink, every operator at the same
 * parallelism) on a MiniCluster with the hashmap state backend and filesystem checkpoint
 * storage in a temporary folder. Prints one JSON object on standard output.
 *
 * <pre>
 *   latency    --parallelism P --depth D --interval-ms I --state-bytes N --seconds S --rate R
 *   throughput --parallelism P --depth D --interval-ms I (0 = off) --records N
 *   state, state-throughput: keyed state of K keys x V bytes (StatePeer)
 *   backpressure: checkpoints behind a throttled sink, aligned or unaligned (BackpressurePeer)
 * </pre>
 *
 * Latency mode reads, per checkpoint, Flink's own end-to-end duration from the MiniCluster's
 * REST checkpoint statistics (what the web UI shows: trigger -> latest acknowledgement), Flink's
 * trigger -> completion duration from its CheckpointCoordinator's log calls (CheckpointLog: the
 * finalisation included, as snapflow's end to end includes its durable _metadata; in whole
 * milliseconds as Flink computes it, and in microseconds timed in this JVM), and the time until
 * every non-source subtask was told the checkpoint completed, from CheckpointListener callbacks
 * in this JVM.
 */
public final class FlinkPeer {
  // notifyCheckpointComplete callbacks, per checkpoint id: how many, and the latest wall time.
  static final Map<Long, AtomicInteger> NOTIFY_COUNT = new ConcurrentHashMap<>();
  static final Map<Long, AtomicLong> NOTIFY_LAST_MS = new ConcurrentHashMap<>();

  static void notified(long id) {
    long now = System.currentTimeMillis();
    NOTIFY_COUNT.computeIfAbsent(id, k -> new AtomicInteger()).incrementAndGet();
    NOTIFY_LAST_MS.computeIfAbsent(id, k -> new AtomicLong()).accumulateAndGet(now, Math::max);
  }

  /**
   * Running sum per key (key = seq % keys, value = seq, as snapflow's sequence_source), with
   * `stateBytes` of opaque operator state as ballast, as snapflow's keyed_sum state_bytes.
   */
  static final class KeyedSum extends RichMapFunction<Long, Tuple2<Long, Long>>
      implements CheckpointedFunction, CheckpointListener {
    private final int stateBytes;
    private final long keys;
    private transient ValueState<Long> sum;
    private transient ListState<byte[]> ballastState;
    private transient byte[] ballast;

    KeyedSum(int stateBytes, long keys) {
      this.stateBytes = stateBytes;
      this.keys = keys;
    }

    @Override
    public Tuple2<Long, Long> map(Long seq) throws Exception {
      Long s = sum.value();
      long next = (s == null ? 0 : s) + seq;
      sum.update(next);
      return Tuple2.of(seq % keys, next);
    }

    @Override
    public void initializeState(FunctionInitializationContext ctx) throws Exception {
      sum = ctx.getKeyedStateStore().getState(new ValueStateDescriptor<>("sum", Types.LONG));
      ballastState =
          ctx.getOperatorStateStore()
              .getListState(new ListStateDescriptor<>("ballast", byte[].class));
      ballast = new byte[stateBytes];
      new java.util.Random(42).nextBytes(ballast);
    }

    @Override
    public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
      ballastState.clear();
      if (stateBytes > 0) ballastState.add(ballast);
    }

    @Override
    public void notifyCheckpointComplete(long id) {
      notified(id);
    }
  }

  static final class Identity extends RichMapFunction<Tuple2<Long, Long>, Tuple2<Long, Long>>
      implements CheckpointListener {
    @Override
    public Tuple2<Long, Long> map(Tuple2<Long, Long> r) {
      return r;
    }

    @Override
    public void notifyCheckpointComplete(long id) {
      notified(id);
    }
  }

  static final class Options {
    String mode = "latency";
    int parallelism = 4;
    int depth = 3;
    long intervalMs = 100;
    int stateBytes = 0;
    double seconds = 10;
    long rate = 1000;
    long records = 10_000_000L;
    int keys = 16;
    String checkpointParent = null;  // where the temporary checkpoint folder goes
  }

  static Options parse(String[] args) {
    Options o = new Options();
    if (args.length == 0) usage("missing mode");
    o.mode = args[0];
    if (!o.mode.equals("latency") && !o.mode.equals("throughput")) usage("unknown mode " + o.mode);
    for (int i = 1; i < args.length; i += 2) {
      if (i + 1 >= args.length) usage("missing value for " + args[i]);
      String v = args[i + 1];
      try {
        switch (args[i]) {
          case "--parallelism" -> o.parallelism = Integer.parseInt(v);
          case "--depth" -> o.depth = Integer.parseInt(v);
          case "--interval-ms" -> o.intervalMs = Long.parseLong(v);
          case "--state-bytes" -> o.stateBytes = Integer.parseInt(v);
          case "--seconds" -> o.seconds = Double.parseDouble(v);
          case "--rate" -> o.rate = Long.parseLong(v);
          case "--records" -> o.records = Long.parseLong(v);
          case "--keys" -> o.keys = Integer.parseInt(v);
          case "--checkpoint-dir" -> o.checkpointParent = v;
          default -> usage("unknown option " + args[i]);
        }
      } catch (NumberFormatException e) {
        usage(args[i] + " needs a number, got '" + v + "'");
      }
    }
    if (o.parallelism < 1 || o.parallelism > 256) usage("--parallelism must be 1..256");
    if (o.depth < 1 || o.depth == 2 || o.depth > 32) usage("--depth must be 1 or 3..32");
    if (o.intervalMs < 0) usage("--interval-ms must be >= 0");
    if (o.mode.equals("latency") && o.intervalMs < 10) usage("latency mode needs --interval-ms >= 10");
    if (o.stateBytes < 0) usage("--state-bytes must be >= 0");
    if (o.seconds <= 0 || o.seconds > 600) usage("--seconds must be in (0, 600]");
    if (o.rate < 1) usage("--rate must be >= 1");
    if (o.records < 1) usage("--records must be >= 1");
    if (o.keys < 1) usage("--keys must be >= 1");
    return o;
  }

  static void usage(String why) {
    System.err.println("flink-peer: " + why);
    System.err.println(
        "usage: FlinkPeer latency|throughput [--parallelism P] [--depth D] [--interval-ms I]"
            + " [--state-bytes N] [--seconds S] [--rate R] [--records N] [--keys K]"
            + " [--checkpoint-dir FOLDER]");
    System.exit(2);
  }

  /**
   * Stages as snapflow counts them: depth 1 = the source alone (chained with a discarding
   * sink), 3 = source -> keyBy sum -> sink, 5 = source -> sum -> map -> map -> sink.
   */
  static JobGraph buildJob(Options o, Configuration conf, boolean bounded) {
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
    env.setParallelism(o.parallelism);
    if (o.intervalMs > 0) env.enableCheckpointing(o.intervalMs);
    // snapflow runs every operator as its own subtask: one task per operator here too, so a
    // barrier crosses the same number of hops.
    if (o.depth > 1) env.disableOperatorChaining();
    final long keys = o.keys;
    DataStream<Long> source;
    if (bounded) {
      source = env.fromSequence(0, o.records - 1);
    } else {
      DataGeneratorSource<Long> generator =
          new DataGeneratorSource<>(
              seq -> seq,
              Long.MAX_VALUE,
              RateLimiterStrategy.perSecond((double) o.rate * o.parallelism),
              Types.LONG);
      source = env.fromSource(generator, WatermarkStrategy.noWatermarks(), "sequence");
    }
    if (o.depth == 1) {
      source.sinkTo(new DiscardingSink<>()).name("sink");
    } else {
      DataStream<Tuple2<Long, Long>> stream =
          source.keyBy(seq -> seq % keys, Types.LONG)
              .map(new KeyedSum(o.stateBytes, keys))
              .returns(Types.TUPLE(Types.LONG, Types.LONG));
      for (int i = 0; i < o.depth - 3; ++i)
        stream = stream.map(new Identity()).returns(Types.TUPLE(Types.LONG, Types.LONG));
      stream.sinkTo(new DiscardingSink<>()).name("sink");
    }
    return env.getStreamGraph().getJobGraph();
  }

  static Configuration configuration(Options o, Path checkpoints) {
    Configuration conf = new Configuration();
    // Both the 1.x and the newer key names: unknown keys are ignored.
    conf.setString("state.backend.type", "hashmap");
    conf.setString("state.backend", "hashmap");
    conf.setString("state.checkpoint-storage", "filesystem");
    conf.setString("execution.checkpointing.storage", "filesystem");
    conf.setString("state.checkpoints.dir", checkpoints.toUri().toString());
    conf.setString("execution.checkpointing.dir", checkpoints.toUri().toString());
    conf.setString("rest.bind-address", "127.0.0.1");
    conf.setString("rest.address", "127.0.0.1");
    conf.setString("rest.bind-port", "0");
    conf.setString("web.checkpoints.history", "100000");
    conf.setString("rest.checkpoints.history", "100000");
    conf.setString("taskmanager.numberOfTaskSlots", Integer.toString(o.parallelism));
    return conf;
  }

  public static void main(String[] args) throws Exception {
    if (args.length > 0 && args[0].equals("backpressure")) {
      BackpressurePeer.main(args);
      return;
    }
    if (args.length > 0 && args[0].equals("nexmark")) {
      NexmarkPeer.main(args);
      return;
    }
    if (args.length > 0 && args[0].startsWith("state")) {
      if (!args[0].equals("state") && !args[0].equals("state-throughput"))
        usage("unknown mode " + args[0]);
      StatePeer.main(StatePeer.parse(args));
      return;
    }
    Options o = parse(args);
    Path checkpoints =
        o.checkpointParent == null
            ? Files.createTempDirectory("flink-peer-")
            : Files.createTempDirectory(Path.of(o.checkpointParent), "flink-peer-");
    Configuration conf = configuration(o, checkpoints);
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
      json = o.mode.equals("latency") ? latency(o, conf, cluster) : throughput(o, conf, cluster);
    } finally {
      cluster.close();
      deleteTree(checkpoints);
    }
    System.out.println(json);
    System.out.flush();
    // The MiniCluster leaves non-daemon threads behind on some versions.
    System.exit(0);
  }

  static String throughput(Options o, Configuration conf, MiniCluster cluster) throws Exception {
    JobGraph job = buildJob(o, conf, true);
    JobID id = cluster.submitJob(job).get().getJobID();
    JobResult result = cluster.requestJobResult(id).get();
    if (!result.isSuccess()) throw new IllegalStateException("the Flink job failed: " + result);
    long ms = result.getNetRuntime();
    double perSecond = ms > 0 ? o.records * 1000.0 / ms : 0;
    return String.format(
        Locale.ROOT,
        "{\"system\":\"flink\",\"mode\":\"throughput\",\"flink_version\":\"%s\","
            + "\"parallelism\":%d,\"depth\":%d,\"interval_ms\":%d,\"records\":%d,"
            + "\"net_runtime_ms\":%d,\"records_per_s\":%.1f}",
        org.apache.flink.runtime.util.EnvironmentInformation.getVersion(), o.parallelism,
        o.depth, o.intervalMs, o.records, ms, perSecond);
  }

  static String latency(Options o, Configuration conf, MiniCluster cluster) throws Exception {
    JobGraph job = buildJob(o, conf, false);
    JobID id = cluster.submitJob(job).get().getJobID();
    URI rest = cluster.getRestAddress().get();
    HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    ObjectMapper mapper = new ObjectMapper();
    // id -> {end_to_end_ms, trigger_ms}; completed checkpoints only.
    TreeMap<Long, long[]> completed = new TreeMap<>();
    int failed = 0;
    // Deployment can take long on a loaded machine: the window starts at the first completed
    // checkpoint (bounded wait), so every run measures the same stretch of steady state.
    long startDeadline = System.nanoTime() + 180_000_000_000L;
    while (completed.isEmpty()) {
      if (System.nanoTime() > startDeadline)
        throw new IllegalStateException("no checkpoint completed within 180 s of submission");
      Thread.sleep(200);  // polling interval of the REST statistics, not synchronisation
      failed = Math.max(failed, collect(http, mapper, rest, id, completed));
    }
    final long lastBeforeWindow = completed.lastKey();
    final int failedBeforeWindow = failed;
    long deadline = System.nanoTime() + (long) (o.seconds * 1e9);
    while (System.nanoTime() < deadline) {
      Thread.sleep(200);  // polling interval of the REST statistics, not synchronisation
      failed = Math.max(failed, collect(http, mapper, rest, id, completed));
    }
    failed = Math.max(failed, collect(http, mapper, rest, id, completed));
    cluster.cancelJob(id).get();
    completed.headMap(lastBeforeWindow, true).clear();
    failed -= failedBeforeWindow;
    // The first checkpoints run while the JVM warms up; drop them as snapflow's side does.
    List<Long> ids = new ArrayList<>(completed.keySet());
    int skip = Math.min(ids.size() / 10, 5);
    List<Double> e2e = new ArrayList<>();
    List<Double> completedMs = new ArrayList<>();
    List<Double> completedPreciseMs = new ArrayList<>();
    List<Double> notifiedMs = new ArrayList<>();
    int expectedNotifications = o.depth >= 3 ? o.parallelism * (o.depth - 2) : 0;
    for (int i = skip; i < ids.size(); ++i) {
      long cid = ids.get(i);
      long[] v = completed.get(cid);
      e2e.add((double) v[0]);
      Long toCompletion = CheckpointLog.COMPLETED_MS.get(cid);
      if (toCompletion != null) completedMs.add((double) toCompletion);
      Long triggerNs = CheckpointLog.TRIGGER_NS.get(cid);
      Long completedNs = CheckpointLog.COMPLETED_NS.get(cid);
      if (triggerNs != null && completedNs != null)
        completedPreciseMs.add((completedNs - triggerNs) / 1e6);
      AtomicInteger n = NOTIFY_COUNT.get(cid);
      AtomicLong last = NOTIFY_LAST_MS.get(cid);
      if (expectedNotifications > 0 && n != null && last != null && n.get() >= expectedNotifications)
        notifiedMs.add((double) (last.get() - v[1]));
    }
    return String.format(
        Locale.ROOT,
        "{\"system\":\"flink\",\"mode\":\"latency\",\"flink_version\":\"%s\",\"parallelism\":%d,"
            + "\"depth\":%d,\"interval_ms\":%d,\"state_bytes\":%d,\"seconds\":%.1f,"
            + "\"completed\":%d,\"failed\":%d,\"used\":%d,\"end_to_end_ms\":%s,"
            + "\"to_completion_ms\":%s,\"to_completion_timed_ms\":%s,\"notified_ms\":%s,"
            + "\"resolution_ms\":1}",
        org.apache.flink.runtime.util.EnvironmentInformation.getVersion(), o.parallelism,
        o.depth, o.intervalMs, o.stateBytes, o.seconds, completed.size(), failed, e2e.size(),
        summary(e2e), summary(completedMs), summary(completedPreciseMs), summary(notifiedMs));
  }

  /** Adds newly completed checkpoints from the REST history; returns the failed count. */
  static int collect(HttpClient http, ObjectMapper mapper, URI rest, JobID id,
                     TreeMap<Long, long[]> completed) throws IOException, InterruptedException {
    HttpRequest request =
        HttpRequest.newBuilder(rest.resolve("/jobs/" + id + "/checkpoints"))
            .timeout(Duration.ofSeconds(30))
            .GET()
            .build();
    HttpResponse<String> response;
    try {
      response = http.send(request, HttpResponse.BodyHandlers.ofString());
    } catch (IOException e) {
      return 0;  // a slow answer on a loaded machine: the next poll reads the history again
    }
    if (response.statusCode() != 200) return 0;
    JsonNode root = mapper.readTree(response.body());
    for (JsonNode h : root.path("history")) {
      if (!"COMPLETED".equals(h.path("status").asText())) continue;
      completed.putIfAbsent(
          h.path("id").asLong(),
          new long[] {h.path("end_to_end_duration").asLong(), h.path("trigger_timestamp").asLong()});
    }
    int failed = root.path("counts").path("failed").asInt();
    String why = root.path("latest").path("failed").path("failure_message").asText("");
    if (failed > 0 && !why.isEmpty() && !reportedFailure) {
      reportedFailure = true;  // once: the counts say how many
      System.err.println("flink-peer: a checkpoint failed: " + why);
    }
    return failed;
  }

  static boolean reportedFailure = false;

  static String summary(List<Double> values) {
    if (values.isEmpty()) return "null";
    List<Double> v = new ArrayList<>(values);
    Collections.sort(v);
    return String.format(
        Locale.ROOT,
        "{\"count\":%d,\"p50\":%.3f,\"p99\":%.3f,\"p999\":%.3f,\"max\":%.3f}",
        v.size(), pick(v, 0.5), pick(v, 0.99), pick(v, 0.999), v.get(v.size() - 1));
  }

  static double pick(List<Double> sorted, double p) {
    int k = (int) Math.ceil(p * sorted.size()) - 1;
    return sorted.get(Math.max(0, Math.min(sorted.size() - 1, k)));
  }

  static void deleteTree(Path root) throws IOException {
    if (!Files.exists(root)) return;
    try (var walk = Files.walk(root)) {
      walk.sorted(Collections.reverseOrder()).forEach(p -> p.toFile().delete());
    }
  }
}

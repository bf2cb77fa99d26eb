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
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.execution.ExecutionState;
import org.apache.flink.runtime.executiongraph.AccessExecutionGraph;
import org.apache.flink.runtime.executiongraph.AccessExecutionVertex;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobgraph.SavepointRestoreSettings;
import org.apache.flink.runtime.jobmaster.JobResult;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

/**
 * The Flink side of bench/state-comparison: K keys x V bytes of keyed state, a share of the keys
 * rewritten per checkpoint interval, on a MiniCluster with filesystem checkpoint storage in a
 * temporary folder. source (key, seq) -> keyBy -> KeyedProcessFunction holding ValueState<byte[]>
 * of V bytes per key, rewritten from the record -> discarding sink. Prints one JSON object.
 *
 * <pre>
 *   state --parallelism P --keys K --value-bytes V --interval-ms I --backend hashmap|rocksdb|forst
 *         --incremental true|false --change-percent X --checkpoints N [--fail true|false]
 *         [--rescale P2,P3,...] [--seed S] [--checkpoint-dir FOLDER]
 *   state-throughput --parallelism P --keys K --value-bytes V --interval-ms I (0 = off)
 *         --backend B --incremental B --records N
 * </pre>
 *
 * Phases of state mode: load (every key once, as fast as the job goes), then steady (keys drawn
 * uniformly at random, seeded, at a rate that changes about X% of the keys per interval) for N
 * completed checkpoints after the first one triggered after the load. Per checkpoint, Flink's
 * own REST statistics: end_to_end_duration, checkpointed_size (what it wrote) and state_size
 * (full). Then, with --fail, an injected failure (the keyed function throws once) and the time
 * from it to every task RUNNING again (the job master's execution graph, polled every 5 ms), to the first record processed
 * after the restore and to the first checkpoint completed after it. Then, with --rescale, per
 * parallelism in turn: stop-with-savepoint, resubmission of the keyed function and the sink at
 * that parallelism from the savepoint, and the time from the stop request to every task RUNNING.
 *
 * The sources pace themselves in the generator function (a sleep when more than 1 ms ahead of
 * the rate), which can hold a barrier at a source for up to that long. The MiniCluster runs in
 * this JVM, so the phases are coordinated through static fields.
 */
public final class StatePeer {
  // Shared by every subtask of the job and this driver (one JVM).
  static final AtomicLong NEXT_LOAD_KEY = new AtomicLong();
  static final AtomicLong LOAD_DONE_MS = new AtomicLong();
  static final AtomicBoolean FAIL_NOW = new AtomicBoolean();
  static final AtomicLong FAILED_NS = new AtomicLong();
  static final AtomicLong FIRST_AFTER_RESTORE_NS = new AtomicLong();

  private StatePeer() {}

  static final class Options {
    String mode;
    int parallelism = 2;
    long keys = 1000;
    int valueBytes = 100;
    long intervalMs = 1000;
    String backend = "rocksdb";
    boolean incremental = true;
    double changePercent = 1.0;
    int checkpoints = 10;
    boolean fail = false;
    List<Integer> rescale = new ArrayList<>();
    long seed = 42;
    long records = 1_000_000;
    String checkpointParent = null;
  }

  static Options parse(String[] args) {
    Options o = new Options();
    o.mode = args[0];
    for (int i = 1; i < args.length; i += 2) {
      if (i + 1 >= args.length) usage("missing value for " + args[i]);
      String v = args[i + 1];
      try {
        switch (args[i]) {
          case "--parallelism" -> o.parallelism = Integer.parseInt(v);
          case "--keys" -> o.keys = Long.parseLong(v);
          case "--value-bytes" -> o.valueBytes = Integer.parseInt(v);
          case "--interval-ms" -> o.intervalMs = Long.parseLong(v);
          case "--backend" -> o.backend = v;
          case "--incremental" -> o.incremental = bool(v);
          case "--change-percent" -> o.changePercent = Double.parseDouble(v);
          case "--checkpoints" -> o.checkpoints = Integer.parseInt(v);
          case "--fail" -> o.fail = bool(v);
          case "--rescale" -> {
            for (String p : v.split(",")) if (!p.isBlank()) o.rescale.add(Integer.parseInt(p.trim()));
          }
          case "--seed" -> o.seed = Long.parseLong(v);
          case "--records" -> o.records = Long.parseLong(v);
          case "--checkpoint-dir" -> o.checkpointParent = v;
          default -> usage("unknown option " + args[i]);
        }
      } catch (NumberFormatException e) {
        usage(args[i] + " needs a number, got '" + v + "'");
      }
    }
    if (o.parallelism < 1 || o.parallelism > 256) usage("--parallelism must be 1..256");
    for (int p : o.rescale) if (p < 1 || p > 256) usage("--rescale parallelisms must be 1..256");
    if (o.keys < 1) usage("--keys must be >= 1");
    if (o.valueBytes < 1 || o.valueBytes > (16 << 20)) usage("--value-bytes must be 1..16777216");
    if (o.intervalMs < 0 || (o.mode.equals("state") && o.intervalMs < 10))
      usage("--interval-ms must be >= 10 (state) or >= 0 (state-throughput, 0 = off)");
    if (!List.of("hashmap", "rocksdb", "forst").contains(o.backend))
      usage("--backend must be hashmap, rocksdb or forst");
    if (!(o.changePercent > 0 && o.changePercent <= 100)) usage("--change-percent must be in (0, 100]");
    if (o.checkpoints < 1 || o.checkpoints > 100000) usage("--checkpoints must be 1..100000");
    if (o.records < 1) usage("--records must be >= 1");
    return o;
  }

  static boolean bool(String v) {
    if (v.equals("true")) return true;
    if (v.equals("false")) return false;
    throw new NumberFormatException(v);
  }

  static void usage(String why) {
    System.err.println("flink-peer: " + why);
    System.err.println(
        "usage: FlinkPeer state|state-throughput [--parallelism P] [--keys K] [--value-bytes V]"
            + " [--interval-ms I] [--backend hashmap|rocksdb|forst] [--incremental true|false]"
            + " [--change-percent X] [--checkpoints N] [--fail true|false] [--rescale P2,P3]"
            + " [--seed S] [--records N] [--checkpoint-dir FOLDER]");
    System.exit(2);
  }

  /**
   * (key, seq): during the load every key once (taken from a counter all subtasks share, so a
   * restart does not load again), then keys drawn uniformly at random at `perSubtaskRate`
   * records/s (0 = unlimited, then key = seq % keys: the throughput mode).
   */
  static final class KeyGenerator implements GeneratorFunction<Long, Tuple2<Long, Long>> {
    private final long keys;
    private final double perSubtaskRate;
    private final long seed;
    private final boolean load;
    private transient java.util.SplittableRandom random;
    private transient long steadyStartNs;
    private transient long emitted;

    KeyGenerator(long keys, double perSubtaskRate, long seed, boolean load) {
      this.keys = keys;
      this.perSubtaskRate = perSubtaskRate;
      this.seed = seed;
      this.load = load;
    }

    @Override
    public void open(SourceReaderContext context) {
      random = new java.util.SplittableRandom(seed * 1_000_003L + context.getIndexOfSubtask());
    }

    @Override
    public Tuple2<Long, Long> map(Long seq) {
      if (!load) return Tuple2.of(seq % keys, seq);
      if (LOAD_DONE_MS.get() == 0) {
        long key = NEXT_LOAD_KEY.getAndIncrement();
        if (key < keys) return Tuple2.of(key, seq);
        LOAD_DONE_MS.compareAndSet(0, System.currentTimeMillis());
      }
      if (steadyStartNs == 0) steadyStartNs = System.nanoTime();
      long due = steadyStartNs + (long) (emitted * 1e9 / perSubtaskRate);
      long ahead = due - System.nanoTime();
      if (ahead > 1_000_000L) LockSupport.parkNanos(ahead);
      ++emitted;
      return Tuple2.of(random.nextLong(keys), seq);
    }
  }

  /**
   * V bytes of ValueState per key, rewritten from (key, seq) by every record of the key, beside a
   * running sum per key read and written again per record: what snapflow's keyed_sum with
   * value_bytes does (a read-modify-write and two writes per record).
   */
  static final class RewriteValue extends KeyedProcessFunction<Long, Tuple2<Long, Long>, Long> {
    private final int valueBytes;
    private transient ValueState<byte[]> value;
    private transient ValueState<Long> sum;
    private transient boolean restored;

    RewriteValue(int valueBytes) {
      this.valueBytes = valueBytes;
    }

    @Override
    public void open(OpenContext context) {
      value = getRuntimeContext().getState(
          new ValueStateDescriptor<>("value", PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO));
      sum = getRuntimeContext().getState(new ValueStateDescriptor<>("sum", Long.class));
      restored = getRuntimeContext().getTaskInfo().getAttemptNumber() > 0;
    }

    @Override
    public void processElement(Tuple2<Long, Long> r, Context ctx, Collector<Long> out)
        throws Exception {
      if (FAIL_NOW.compareAndSet(true, false)) {
        FAILED_NS.set(System.nanoTime());
        throw new IllegalStateException("injected failure (bench/state-comparison)");
      }
      if (restored) {
        FIRST_AFTER_RESTORE_NS.compareAndSet(0, System.nanoTime());
        restored = false;
      }
      final Long before = sum.value();
      final long after = (before == null ? 0 : before) + r.f1;
      sum.update(after);
      value.update(fill(r.f0, r.f1, valueBytes));
      out.collect(after);
    }
  }

  /** xorshift bytes seeded by key and seq, as snapflow's keyed_sum value_bytes. */
  static byte[] fill(long key, long seq, int n) {
    byte[] b = new byte[n];
    long x = mix(key ^ mix(seq)) | 1;
    for (int i = 0; i < n; i += 8) {
      x ^= x << 13;
      x ^= x >>> 7;
      x ^= x << 17;
      for (int j = 0; j < 8 && i + j < n; ++j) b[i + j] = (byte) (x >>> (8 * j));
    }
    return b;
  }

  static long mix(long x) {
    x += 0x9e3779b97f4a7c15L;
    x = (x ^ (x >>> 30)) * 0xbf58476d1ce4e5b9L;
    x = (x ^ (x >>> 27)) * 0x94d049bb133111ebL;
    return x ^ (x >>> 31);
  }

  static JobGraph buildJob(Options o, Configuration conf, int keyedParallelism, boolean bounded) {
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
    env.setParallelism(o.parallelism);
    env.setMaxParallelism(128);  // snapflow's default number of key groups
    if (o.intervalMs > 0) env.enableCheckpointing(o.intervalMs);
    env.disableOperatorChaining();  // one task per operator, as snapflow runs them
    double perSubtask = o.keys * o.changePercent / 100.0 * 1000.0 / o.intervalMs / o.parallelism;
    long count = bounded ? o.records : Long.MAX_VALUE;
    DataGeneratorSource<Tuple2<Long, Long>> generator =
        new DataGeneratorSource<>(
            new KeyGenerator(o.keys, Math.max(perSubtask, 1.0), o.seed, !bounded), count,
            Types.TUPLE(Types.LONG, Types.LONG));
    DataStream<Tuple2<Long, Long>> source =
        env.fromSource(generator, WatermarkStrategy.noWatermarks(), "keys").uid("source");
    source
        .keyBy(r -> r.f0, Types.LONG)
        .process(new RewriteValue(o.valueBytes))
        .uid("value")
        .setParallelism(keyedParallelism)
        .returns(Types.LONG)
        .sinkTo(new DiscardingSink<>())
        .uid("sink")
        .setParallelism(keyedParallelism)
        .name("sink");
    return env.getStreamGraph().getJobGraph();
  }

  static Configuration configuration(Options o, Path checkpoints, int slots) {
    Configuration conf = FlinkPeer.configuration(new FlinkPeer.Options(), checkpoints);
    conf.setString("state.backend.type", o.backend);
    conf.setString("state.backend", o.backend);  // the 1.x name; ignored where unknown
    // 2.x reads execution.checkpointing.incremental; 1.20 knows it too, with
    // state.backend.incremental as its deprecated name. The JSON reports the key Flink uses.
    conf.setString("execution.checkpointing.incremental", Boolean.toString(o.incremental));
    conf.setString("state.backend.incremental", Boolean.toString(o.incremental));
    conf.setString("taskmanager.numberOfTaskSlots", Integer.toString(slots));
    // REST's checkpoint statistics are cached this long (default: web.refresh-interval, 3 s).
    conf.setString("rest.cache.checkpoint-statistics.timeout", "10 ms");
    // Restart at once, as snapflow's default strategy does for its first restart.
    conf.setString("restart-strategy.type", "fixed-delay");
    conf.setString("restart-strategy.fixed-delay.attempts", "1000");
    conf.setString("restart-strategy.fixed-delay.delay", "0 ms");
    return conf;
  }

  public static void main(Options o) throws Exception {
    Path checkpoints =
        o.checkpointParent == null
            ? Files.createTempDirectory("flink-peer-")
            : Files.createTempDirectory(Path.of(o.checkpointParent), "flink-peer-");
    int slots = o.parallelism;
    for (int p : o.rescale) slots = Math.max(slots, p);
    Configuration conf = configuration(o, checkpoints, slots);
    MiniCluster cluster =
        new MiniCluster(
            new MiniClusterConfiguration.Builder()
                .setConfiguration(conf)
                .setNumTaskManagers(1)
                .setNumSlotsPerTaskManager(slots)
                .build());
    String json;
    try {
      cluster.start();
      json = o.mode.equals("state") ? state(o, conf, cluster, checkpoints)
                                    : throughput(o, conf, cluster);
    } finally {
      cluster.close();
      FlinkPeer.deleteTree(checkpoints);
    }
    System.out.println(json);
    System.out.flush();
    System.exit(0);
  }

  static String common(Options o) {
    return String.format(
        Locale.ROOT,
        "\"system\":\"flink\",\"mode\":\"%s\",\"flink_version\":\"%s\",\"parallelism\":%d,"
            + "\"keys\":%d,\"value_bytes\":%d,\"interval_ms\":%d,\"backend\":\"%s\","
            + "\"incremental\":%b,\"incremental_key\":\"%s\"",
        o.mode, org.apache.flink.runtime.util.EnvironmentInformation.getVersion(), o.parallelism,
        o.keys, o.valueBytes, o.intervalMs, o.backend, o.incremental,
        CheckpointingOptions.INCREMENTAL_CHECKPOINTS.key());
  }

  static String throughput(Options o, Configuration conf, MiniCluster cluster) throws Exception {
    JobID id = cluster.submitJob(buildJob(o, conf, o.parallelism, true)).get().getJobID();
    JobResult result = cluster.requestJobResult(id).get();
    if (!result.isSuccess()) throw new IllegalStateException("the Flink job failed: " + result);
    long ms = result.getNetRuntime();
    return String.format(
        Locale.ROOT, "{%s,\"records\":%d,\"net_runtime_ms\":%d,\"records_per_s\":%.1f}",
        common(o), o.records, ms, ms > 0 ? o.records * 1000.0 / ms : 0);
  }

  /** One completed checkpoint from the REST history. */
  record Checkpoint(long id, long triggerMs, long e2eMs, long checkpointedBytes, long stateBytes,
                    boolean savepoint) {}

  static final class Rest {
    final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    final ObjectMapper mapper = new ObjectMapper();
    final URI base;

    Rest(URI base) {
      this.base = base;
    }

    JsonNode get(String path) throws IOException, InterruptedException {
      HttpRequest request =
          HttpRequest.newBuilder(base.resolve(path)).timeout(Duration.ofSeconds(30)).GET().build();
      HttpResponse<String> response = http.send(request, HttpResponse.BodyHandlers.ofString());
      if (response.statusCode() != 200) return null;
      return mapper.readTree(response.body());
    }

    /** Completed checkpoints by id, and the checkpoint stats' root. */
    JsonNode checkpoints(JobID id, TreeMap<Long, Checkpoint> into)
        throws IOException, InterruptedException {
      JsonNode root = get("/jobs/" + id + "/checkpoints");
      if (root == null) return null;
      for (JsonNode h : root.path("history")) {
        if (!"COMPLETED".equals(h.path("status").asText())) continue;
        into.putIfAbsent(
            h.path("id").asLong(),
            new Checkpoint(h.path("id").asLong(), h.path("trigger_timestamp").asLong(),
                           h.path("end_to_end_duration").asLong(),
                           h.path("checkpointed_size").asLong(), h.path("state_size").asLong(),
                           h.path("is_savepoint").asBoolean()));
      }
      return root;
    }
  }

  /**
   * Every execution of the job RUNNING, each since `sinceMs` or later: read from the job master
   * (MiniCluster.getExecutionGraph), not from REST, whose job details are cached for
   * web.refresh-interval. A task is RUNNING once its state is restored.
   */
  static boolean allRunningSince(MiniCluster cluster, JobID id, long sinceMs) throws Exception {
    AccessExecutionGraph graph = cluster.getExecutionGraph(id).get();
    if (graph.getState() != JobStatus.RUNNING) return false;
    int n = 0;
    for (AccessExecutionVertex v : graph.getAllExecutionVertices()) {
      if (v.getExecutionState() != ExecutionState.RUNNING
          || v.getStateTimestamp(ExecutionState.RUNNING) < sinceMs) return false;
      ++n;
    }
    return n > 0;
  }

  static void waitFor(String what, long timeoutS, Check check) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutS);
    while (!check.ok()) {
      if (System.nanoTime() > deadline) throw new IllegalStateException(what + " within " + timeoutS + " s");
      Thread.sleep(5);  // polling REST, not synchronisation
    }
  }

  interface Check {
    boolean ok() throws Exception;
  }

  static String state(Options o, Configuration conf, MiniCluster cluster, Path checkpoints)
      throws Exception {
    long submitMs = System.currentTimeMillis();
    JobID id = cluster.submitJob(buildJob(o, conf, o.parallelism, false)).get().getJobID();
    Rest rest = new Rest(cluster.getRestAddress().get());
    TreeMap<Long, Checkpoint> done = new TreeMap<>();
    waitFor("the load did not end", 3600, () -> LOAD_DONE_MS.get() != 0);
    long loadDoneMs = LOAD_DONE_MS.get();
    // The first checkpoint triggered after the load holds all of it: reported apart.
    waitFor("no checkpoint after the load", 3600, () -> {
      rest.checkpoints(id, done);
      return done.values().stream().anyMatch(c -> c.triggerMs() > loadDoneMs);
    });
    Checkpoint afterLoad =
        done.values().stream().filter(c -> c.triggerMs() > loadDoneMs).findFirst().get();
    waitFor("too few steady checkpoints", 3600, () -> {
      rest.checkpoints(id, done);
      return done.tailMap(afterLoad.id(), false).size() >= o.checkpoints;
    });
    List<Checkpoint> steady = new ArrayList<>(done.tailMap(afterLoad.id(), false).values());
    steady = steady.subList(0, o.checkpoints);
    JsonNode stats = rest.checkpoints(id, done);
    JsonNode counts = stats.path("counts");
    String failedWhy = stats.path("latest").path("failed").path("failure_message").asText("");

    StringBuilder restore = new StringBuilder("null");
    if (o.fail) restore = new StringBuilder(injectFailure(o, cluster, rest, id, done));

    // Canonical savepoints, as snapflow's are backend-neutral; ForSt takes native ones only.
    SavepointFormatType format =
        o.backend.equals("forst") ? SavepointFormatType.NATIVE : SavepointFormatType.CANONICAL;
    StringBuilder rescales = new StringBuilder("[");
    int from = o.parallelism;
    JobID current = id;
    for (int to : o.rescale) {
      if (rescales.length() > 1) rescales.append(',');
      Path target = Files.createTempDirectory(checkpoints, "savepoint-");
      long t0 = System.nanoTime();
      String savepoint =
          cluster.stopWithSavepoint(current, target.toUri().toString(), false, format).get();
      long stoppedNs = System.nanoTime();
      JobGraph next = buildJob(o, conf, to, false);
      next.setSavepointRestoreSettings(SavepointRestoreSettings.forPath(savepoint, false));
      JobID nextId = cluster.submitJob(next).get().getJobID();
      final JobID waitId = nextId;
      waitFor("the rescaled job did not run", 600, () -> allRunningSince(cluster, waitId, 0));
      long runningNs = System.nanoTime();
      rescales.append(String.format(
          Locale.ROOT,
          "{\"from\":%d,\"to\":%d,\"savepoint_format\":\"%s\",\"savepoint_bytes\":%d,\"stop_with_savepoint_ms\":%.1f,"
              + "\"request_to_running_ms\":%.1f}",
          from, to, format, folderBytes(Path.of(URI.create(savepoint.startsWith("file:") ? savepoint
                                                       : "file://" + savepoint))),
          (stoppedNs - t0) / 1e6, (runningNs - t0) / 1e6));
      from = to;
      current = nextId;
    }
    rescales.append(']');
    cluster.cancelJob(current).get();

    StringBuilder perCheckpoint = new StringBuilder("[");
    for (Checkpoint c : steady) {
      if (perCheckpoint.length() > 1) perCheckpoint.append(',');
      // Trigger -> completed as Flink's coordinator logged it (the finalisation included, as
      // snapflow's end to end), beside REST's trigger -> latest acknowledgement.
      Long toCompletion = CheckpointLog.COMPLETED_MS.get(c.id());
      perCheckpoint.append(String.format(
          Locale.ROOT,
          "{\"id\":%d,\"end_to_end_ms\":%d,\"to_completion_ms\":%d,\"checkpointed_bytes\":%d,"
              + "\"state_bytes\":%d}",
          c.id(), c.e2eMs(), toCompletion == null ? -1 : toCompletion, c.checkpointedBytes(),
          c.stateBytes()));
    }
    perCheckpoint.append(']');
    return String.format(
        Locale.ROOT,
        "{%s,\"change_percent\":%.3f,\"load_ms\":%d,"
            + "\"after_load\":{\"id\":%d,\"end_to_end_ms\":%d,\"checkpointed_bytes\":%d,"
            + "\"state_bytes\":%d},\"failed_checkpoints\":%d,\"failed_checkpoint_message\":%s,"
            + "\"checkpoints\":%s,"
            + "\"restore\":%s,\"rescale\":%s}",
        common(o), o.changePercent, loadDoneMs - submitMs, afterLoad.id(), afterLoad.e2eMs(),
        afterLoad.checkpointedBytes(), afterLoad.stateBytes(), counts.path("failed").asInt(),
        new ObjectMapper().writeValueAsString(failedWhy), perCheckpoint, restore, rescales);
  }

  /** Injected failure -> every task RUNNING, -> first record after restore, -> a checkpoint. */
  static String injectFailure(Options o, MiniCluster cluster, Rest rest, JobID id, TreeMap<Long, Checkpoint> done)
      throws Exception {
    FIRST_AFTER_RESTORE_NS.set(0);
    long failWallMs = System.currentTimeMillis();
    FAIL_NOW.set(true);
    waitFor("the injected failure did not happen", 60, () -> FAILED_NS.get() != 0);
    long failedNs = FAILED_NS.get();
    waitFor("the job did not run again", 600, () -> allRunningSince(cluster, id, failWallMs));
    long runningNs = System.nanoTime();
    waitFor("no record after the restore", 600, () -> FIRST_AFTER_RESTORE_NS.get() != 0);
    final long[] restoredId = {-1};
    waitFor("no checkpoint after the restore", 600, () -> {
      JsonNode root = rest.checkpoints(id, done);
      if (root != null) restoredId[0] = root.path("latest").path("restored").path("id").asLong(-1);
      return done.values().stream().anyMatch(c -> c.triggerMs() > failWallMs + 1
          && c.id() > restoredId[0] && restoredId[0] >= 0);
    });
    long checkpointNs = System.nanoTime();  // within a 5 ms poll of the completion
    Checkpoint restored = done.get(restoredId[0]);
    return String.format(
        Locale.ROOT,
        "{\"how\":\"injected exception in the keyed function\",\"restored_checkpoint\":%d,"
            + "\"restored_state_bytes\":%d,\"to_running_ms\":%.1f,\"to_first_record_ms\":%.1f,"
            + "\"to_checkpoint_ms\":%.1f}",
        restoredId[0], restored == null ? -1 : restored.stateBytes(), (runningNs - failedNs) / 1e6,
        (FIRST_AFTER_RESTORE_NS.get() - failedNs) / 1e6, (checkpointNs - failedNs) / 1e6);
  }

  static long folderBytes(Path root) throws IOException {
    if (!Files.exists(root)) return -1;
    try (var walk = Files.walk(root)) {
      return walk.filter(Files::isRegularFile).mapToLong(p -> p.toFile().length()).sum();
    }
  }
}

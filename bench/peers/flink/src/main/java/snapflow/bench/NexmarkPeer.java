package snapflow.bench;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.api.java.tuple.Tuple4;
import org.apache.flink.api.java.tuple.Tuple5;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobmaster.JobResult;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.co.KeyedCoProcessFunction;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.assigners.SlidingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.util.Collector;

/**
 * Nexmark q0..q5, q7 and q8 on Flink's DataStream API, the same queries as examples/nexmark: events
 * by number from DataGeneratorSource (which splits the numbers over the source subtasks) through
 * {@link NexmarkGenerator}, rows into a DiscardingSink. q5 and q7 run on event time: watermarks
 * per source split with no out-of-orderness, event-time windows, and a second keyed stage per
 * window fired by an event-time timer at the window's max timestamp, as snapflow's jobs do. One bounded run on a MiniCluster; prints one
 * JSON line with events/s (events / the job's net runtime) and checkpoint durations as Flink's
 * coordinator logged them (trigger -> completion, CheckpointLog).
 *
 * <pre>
 *   nexmark --query q0..q5|q7|q8 --events N --parallelism P --interval-ms I (0 = off) [--checkpoint-dir D]
 * </pre>
 */
public final class NexmarkPeer {
  private NexmarkPeer() {}

  static final class Options {
    String query = "q0";
    long events = 2_000_000;
    int parallelism = 2;
    long intervalMs = 0;
    String checkpointParent;
  }

  static Options parse(String[] args) {
    Options o = new Options();
    for (int i = 1; i < args.length; i += 2) {
      if (i + 1 >= args.length) usage("missing value for " + args[i]);
      String v = args[i + 1];
      switch (args[i]) {
        case "--query" -> o.query = v;
        case "--events" -> o.events = Long.parseLong(v);
        case "--parallelism" -> o.parallelism = Integer.parseInt(v);
        case "--interval-ms" -> o.intervalMs = Long.parseLong(v);
        case "--checkpoint-dir" -> o.checkpointParent = v;
        default -> usage("unknown option " + args[i]);
      }
    }
    if (!List.of("q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8").contains(o.query))
      usage("unknown query " + o.query);
    if (o.events < 1 || o.parallelism < 1 || o.intervalMs < 0) usage("bad number");
    return o;
  }

  static void usage(String why) {
    System.err.println(why);
    System.err.println("usage: FlinkPeer nexmark --query q0|q1|q2|q3|q4|q5|q7|q8 [--events N]"
        + " [--parallelism P] [--interval-ms I] [--checkpoint-dir FOLDER]");
    System.exit(2);
  }

  static final class Generate implements GeneratorFunction<Long, NexmarkEvents.Event> {
    private final NexmarkGenerator generator = new NexmarkGenerator();
    private final long events;
    private final int splits;  // 0: the index is the event number

    Generate(long events, int splits) {
      this.events = events;
      this.splits = splits;
    }

    @Override
    public NexmarkEvents.Event map(Long index) {
      return generator.at(splits == 0 ? index : interleaved(index, events, splits));
    }
  }

  /**
   * The event number of generator index {@code i} when the source's splits interleave: split s
   * emits s, s + P, s + 2P, ... as snapflow's sequence source does. DataGeneratorSource cuts
   * 0..N-1 into P ranges, the first N % P of them one longer (NumberSequenceIterator.split);
   * index k of range s becomes number k * P + s, which maps 0..N-1 onto itself. The event-time
   * queries need it: with ranges, a subtask's event time would run ahead of the other's by
   * N / P events and its windows would wait in state for them.
   */
  static long interleaved(long i, long events, int splits) {
    long size = events / splits;
    long longer = events % splits;
    long inLonger = longer * (size + 1);
    if (i < inLonger) return (i % (size + 1)) * splits + i / (size + 1);
    long j = i - inLonger;
    return (j % size) * splits + longer + j / size;
  }

  static boolean eventTime(String query) {
    return query.equals("q5") || query.equals("q7");
  }

  static long timeOf(NexmarkEvents.Event e) {
    if (e.bid != null) return e.bid.dateTime;
    return e.auction != null ? e.auction.dateTime : e.person.dateTime;
  }

  static final long WINDOW_MS = 10_000;
  static final long Q5_SLIDE_MS = 2_000;

  /** q5's first stage: bids per auction and window. */
  static final class CountBids implements AggregateFunction<NexmarkEvents.Bid, Long, Long> {
    @Override
    public Long createAccumulator() {
      return 0L;
    }

    @Override
    public Long add(NexmarkEvents.Bid b, Long n) {
      return n + 1;
    }

    @Override
    public Long getResult(Long n) {
      return n;
    }

    @Override
    public Long merge(Long a, Long b) {
      return a + b;
    }
  }

  /** (window start, auction, bids) of q5's first stage. */
  static final class Q5Count
      extends ProcessWindowFunction<Long, Tuple3<Long, Long, Long>, Long, TimeWindow> {
    @Override
    public void process(Long auction, Context ctx, Iterable<Long> counts,
                        Collector<Tuple3<Long, Long, Long>> out) {
      for (Long n : counts) out.collect(Tuple3.of(ctx.window().getStart(), auction, n));
    }
  }

  /** q5's second stage, keyed by window start: the highest count and its auctions, at the window's end. */
  static final class Q5Top
      extends KeyedProcessFunction<Long, Tuple3<Long, Long, Long>, Tuple3<Long, Long, Long>> {
    private transient ValueState<Long> most;
    private transient ListState<Long> auctions;

    @Override
    public void open(OpenContext context) {
      most = getRuntimeContext().getState(new ValueStateDescriptor<>("most", Long.class));
      auctions = getRuntimeContext().getListState(new ListStateDescriptor<>("auctions", Long.class));
    }

    @Override
    public void processElement(Tuple3<Long, Long, Long> c, Context ctx,
                               Collector<Tuple3<Long, Long, Long>> out) throws Exception {
      Long kept = most.value();
      if (kept != null && kept > c.f2) return;
      if (kept == null || kept < c.f2) {
        most.update(c.f2);
        auctions.clear();
        ctx.timerService().registerEventTimeTimer(c.f0 + WINDOW_MS - 1);
      }
      auctions.add(c.f1);
    }

    @Override
    public void onTimer(long time, OnTimerContext ctx, Collector<Tuple3<Long, Long, Long>> out)
        throws Exception {
      Long n = most.value();
      if (n != null)
        for (Long a : auctions.get()) out.collect(Tuple3.of(ctx.getCurrentKey(), a, n));
      most.clear();
      auctions.clear();
    }
  }

  /** q7's rows: (window start, auction, price, bidder, date time). */
  static Tuple5<Long, Long, Long, Long, Long> q7Row(long windowStart, NexmarkEvents.Bid b) {
    return Tuple5.of(windowStart, b.auction, b.price, b.bidder, b.dateTime);
  }

  /** The bids of the highest price in a window (of one auction, or of all); price -1 before any. */
  public static final class Best {
    public long windowStart;
    public long price = -1;
    public ArrayList<Tuple5<Long, Long, Long, Long, Long>> bids = new ArrayList<>();

    public Best() {}

    void offer(long p, List<Tuple5<Long, Long, Long, Long, Long>> rows) {
      if (p < price) return;
      if (p > price) {
        price = p;
        bids.clear();
      }
      bids.addAll(rows);
    }
  }

  /** q7's first stage: per auction and window, its best bids. */
  static final class BestBids implements AggregateFunction<NexmarkEvents.Bid, Best, Best> {
    @Override
    public Best createAccumulator() {
      return new Best();
    }

    @Override
    public Best add(NexmarkEvents.Bid b, Best best) {
      best.offer(b.price, List.of(q7Row(window(b.dateTime), b)));
      return best;
    }

    @Override
    public Best getResult(Best best) {
      return best;
    }

    @Override
    public Best merge(Best a, Best b) {
      a.offer(b.price, b.bids);
      return a;
    }
  }

  static final class Q7WindowStart extends ProcessWindowFunction<Best, Best, Long, TimeWindow> {
    @Override
    public void process(Long auction, Context ctx, Iterable<Best> bests, Collector<Best> out) {
      for (Best b : bests) {
        b.windowStart = ctx.window().getStart();
        out.collect(b);
      }
    }
  }

  /** q7's second stage, keyed by window start: the best bids of all auctions, at the window's end. */
  static final class Q7Max
      extends KeyedProcessFunction<Long, Best, Tuple5<Long, Long, Long, Long, Long>> {
    private transient ValueState<Long> price;
    private transient ListState<Tuple5<Long, Long, Long, Long, Long>> bids;

    @Override
    public void open(OpenContext context) {
      price = getRuntimeContext().getState(new ValueStateDescriptor<>("price", Long.class));
      bids = getRuntimeContext().getListState(new ListStateDescriptor<>(
          "bids", Types.TUPLE(Types.LONG, Types.LONG, Types.LONG, Types.LONG, Types.LONG)));
    }

    @Override
    public void processElement(Best b, Context ctx,
                               Collector<Tuple5<Long, Long, Long, Long, Long>> out) throws Exception {
      Long kept = price.value();
      if (kept != null && kept > b.price) return;
      if (kept == null || kept < b.price) {
        price.update(b.price);
        bids.clear();
        ctx.timerService().registerEventTimeTimer(b.windowStart + WINDOW_MS - 1);
      }
      bids.addAll(b.bids);
    }

    @Override
    public void onTimer(long time, OnTimerContext ctx,
                        Collector<Tuple5<Long, Long, Long, Long, Long>> out) throws Exception {
      for (Tuple5<Long, Long, Long, Long, Long> row : bids.get()) out.collect(row);
      price.clear();
      bids.clear();
    }
  }

  /** q3: people kept per id, auctions waiting for their seller. */
  static final class Q3Join
      extends KeyedCoProcessFunction<Long, NexmarkEvents.Person, NexmarkEvents.Auction,
                                     Tuple4<String, String, String, Long>> {
    private transient ValueState<NexmarkEvents.Person> person;
    private transient ListState<Long> waiting;

    @Override
    public void open(OpenContext context) {
      person = getRuntimeContext().getState(new ValueStateDescriptor<>("person", NexmarkEvents.Person.class));
      waiting = getRuntimeContext().getListState(new ListStateDescriptor<>("waiting", Long.class));
    }

    @Override
    public void processElement1(NexmarkEvents.Person p, Context ctx,
                                Collector<Tuple4<String, String, String, Long>> out)
        throws Exception {
      person.update(p);
      for (Long id : waiting.get()) out.collect(Tuple4.of(p.name, p.city, p.state, id));
      waiting.clear();
    }

    @Override
    public void processElement2(NexmarkEvents.Auction a, Context ctx,
                                Collector<Tuple4<String, String, String, Long>> out)
        throws Exception {
      NexmarkEvents.Person p = person.value();
      if (p != null) out.collect(Tuple4.of(p.name, p.city, p.state, a.id));
      else waiting.add(a.id);
    }
  }

  /** q4's first stage: per auction, its best valid price so far (auction, category, price). */
  static final class Q4Winning
      extends KeyedCoProcessFunction<Long, NexmarkEvents.Auction, NexmarkEvents.Bid, Tuple3<Long, Long, Long>> {
    private transient ValueState<Tuple4<Long, Long, Long, Long>> auction;  // start, expires, reserve, category
    private transient ValueState<Long> best;
    private transient ListState<Tuple2<Long, Long>> early;  // date time, price

    @Override
    public void open(OpenContext context) {
      auction = getRuntimeContext().getState(new ValueStateDescriptor<>(
          "auction", Types.TUPLE(Types.LONG, Types.LONG, Types.LONG, Types.LONG)));
      best = getRuntimeContext().getState(new ValueStateDescriptor<>("best", Long.class));
      early = getRuntimeContext().getListState(
          new ListStateDescriptor<>("early", Types.TUPLE(Types.LONG, Types.LONG)));
    }

    static boolean valid(Tuple4<Long, Long, Long, Long> a, long time, long price) {
      return time >= a.f0 && time <= a.f1 && price >= a.f2;
    }

    void offer(Tuple4<Long, Long, Long, Long> a, long price, long id,
               Collector<Tuple3<Long, Long, Long>> out) throws Exception {
      Long b = best.value();
      if (b != null && b >= price) return;
      best.update(price);
      out.collect(Tuple3.of(id, a.f3, price));
    }

    @Override
    public void processElement1(NexmarkEvents.Auction a, Context ctx,
                                Collector<Tuple3<Long, Long, Long>> out) throws Exception {
      Tuple4<Long, Long, Long, Long> kept = Tuple4.of(a.dateTime, a.expires, a.reserve, a.category);
      auction.update(kept);
      long top = -1;
      for (Tuple2<Long, Long> b : early.get())
        if (valid(kept, b.f0, b.f1)) top = Math.max(top, b.f1);
      early.clear();
      if (top >= 0) offer(kept, top, a.id, out);
    }

    @Override
    public void processElement2(NexmarkEvents.Bid b, Context ctx, Collector<Tuple3<Long, Long, Long>> out)
        throws Exception {
      Tuple4<Long, Long, Long, Long> kept = auction.value();
      if (kept == null) {
        early.add(Tuple2.of(b.dateTime, b.price));
        return;
      }
      if (valid(kept, b.dateTime, b.price)) offer(kept, b.price, b.auction, out);
    }
  }

  /** q4's second stage: per category, each auction's best price; emits (category, average, version). */
  static final class Q4Average
      extends KeyedProcessFunction<Long, Tuple3<Long, Long, Long>, Tuple3<Long, Long, Long>> {
    private transient MapState<Long, Long> prices;
    private transient ValueState<Long> sum;
    private transient ValueState<Long> count;
    private transient ValueState<Long> version;

    @Override
    public void open(OpenContext context) {
      prices = getRuntimeContext().getMapState(new MapStateDescriptor<>("prices", Long.class, Long.class));
      sum = getRuntimeContext().getState(new ValueStateDescriptor<>("sum", Long.class));
      count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Long.class));
      version = getRuntimeContext().getState(new ValueStateDescriptor<>("version", Long.class));
    }

    static long or0(Long v) {
      return v == null ? 0 : v;
    }

    @Override
    public void processElement(Tuple3<Long, Long, Long> w, Context ctx,
                               Collector<Tuple3<Long, Long, Long>> out) throws Exception {
      long s = or0(sum.value());
      long n = or0(count.value());
      Long old = prices.get(w.f0);
      if (old != null) {
        s += w.f2 - old;
      } else {
        s += w.f2;
        ++n;
      }
      prices.put(w.f0, w.f2);
      sum.update(s);
      count.update(n);
      long v = or0(version.value()) + 1;
      version.update(v);
      out.collect(Tuple3.of(w.f1, s / n, v));
    }
  }

  /**
   * q8 as examples/nexmark writes it: an incremental join keyed by (person id, window start)
   * that emits (person, name, window start) once both sides were seen.
   */
  static final class Q8Join
      extends KeyedCoProcessFunction<Tuple2<Long, Long>, NexmarkEvents.Person,
                                     NexmarkEvents.Auction, Tuple3<Long, String, Long>> {
    private transient ValueState<String> name;
    private transient ValueState<Boolean> sold;
    private transient ValueState<Boolean> emitted;

    @Override
    public void open(OpenContext context) {
      name = getRuntimeContext().getState(new ValueStateDescriptor<>("name", String.class));
      sold = getRuntimeContext().getState(new ValueStateDescriptor<>("sold", Boolean.class));
      emitted = getRuntimeContext().getState(new ValueStateDescriptor<>("emitted", Boolean.class));
    }

    void emitOnce(Context ctx, Collector<Tuple3<Long, String, Long>> out) throws Exception {
      if (name.value() == null || sold.value() == null || emitted.value() != null) return;
      emitted.update(true);
      Tuple2<Long, Long> key = ctx.getCurrentKey();
      out.collect(Tuple3.of(key.f0, name.value(), key.f1));
    }

    @Override
    public void processElement1(NexmarkEvents.Person p, Context ctx,
                                Collector<Tuple3<Long, String, Long>> out) throws Exception {
      name.update(p.name);
      emitOnce(ctx, out);
    }

    @Override
    public void processElement2(NexmarkEvents.Auction a, Context ctx,
                                Collector<Tuple3<Long, String, Long>> out) throws Exception {
      sold.update(true);
      emitOnce(ctx, out);
    }
  }

  static long window(long t) {
    return t - Math.floorMod(t, WINDOW_MS);
  }

  static DataStream<NexmarkEvents.Bid> bids(DataStream<NexmarkEvents.Event> events) {
    return events.filter(e -> e.bid != null).name("bids").map(e -> e.bid)
        .returns(NexmarkEvents.Bid.class).name("bids");
  }

  static JobGraph build(Options o, Configuration conf) {
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
    env.setParallelism(o.parallelism);
    env.setMaxParallelism(128);  // snapflow's default number of key groups
    if (o.intervalMs > 0) env.enableCheckpointing(o.intervalMs);
    env.disableOperatorChaining();  // one task per operator, as snapflow runs them
    boolean eventTime = eventTime(o.query);
    DataGeneratorSource<NexmarkEvents.Event> source = new DataGeneratorSource<>(
        new Generate(o.events, eventTime ? o.parallelism : 0), o.events,
        TypeInformation.of(NexmarkEvents.Event.class));
    // Event time per source split; a split's times never go back, so no out-of-orderness.
    WatermarkStrategy<NexmarkEvents.Event> watermarks = eventTime
        ? WatermarkStrategy.<NexmarkEvents.Event>forMonotonousTimestamps()
            .withTimestampAssigner((e, previous) -> timeOf(e))
        : WatermarkStrategy.noWatermarks();
    DataStream<NexmarkEvents.Event> events =
        env.fromSource(source, watermarks, "nexmark-source").uid("source");
    DataStream<?> rows;
    switch (o.query) {
      case "q0" -> rows = bids(events).map(b -> b).returns(NexmarkEvents.Bid.class).name("q0-pass");
      case "q1" -> rows = bids(events).map(b -> {
            b.price = b.price * 908 / 1000;
            return b;
          }).returns(NexmarkEvents.Bid.class).name("q1-convert");
      case "q2" -> rows = bids(events).filter(b -> b.auction % 123 == 0).name("q2-select")
          .map(b -> Tuple2.of(b.auction, b.price)).returns(Types.TUPLE(Types.LONG, Types.LONG))
          .name("q2-project");
      case "q3" -> {
        DataStream<NexmarkEvents.Person> persons = events.filter(e -> e.person != null).name("persons")
            .map(e -> e.person).returns(NexmarkEvents.Person.class).name("persons")
            .filter(p -> p.state.equals("OR") || p.state.equals("ID") || p.state.equals("CA"))
            .name("q3-states");
        DataStream<NexmarkEvents.Auction> auctions = events.filter(e -> e.auction != null)
            .name("auctions").map(e -> e.auction).returns(NexmarkEvents.Auction.class).name("auctions")
            .filter(a -> a.category == 10).name("q3-category");
        rows = persons.connect(auctions).keyBy(p -> p.id, a -> a.seller, Types.LONG)
            .process(new Q3Join())
            .returns(Types.TUPLE(Types.STRING, Types.STRING, Types.STRING, Types.LONG))
            .uid("q3-join").name("q3-join");
      }
      case "q5" -> rows = bids(events).keyBy(b -> b.auction, Types.LONG)
          .window(SlidingEventTimeWindows.of(Duration.ofMillis(WINDOW_MS), Duration.ofMillis(Q5_SLIDE_MS)))
          .aggregate(new CountBids(), new Q5Count(), Types.LONG, Types.LONG,
                     Types.TUPLE(Types.LONG, Types.LONG, Types.LONG))
          .uid("q5-count").name("q5-count")
          .keyBy(c -> c.f0, Types.LONG).process(new Q5Top())
          .returns(Types.TUPLE(Types.LONG, Types.LONG, Types.LONG))
          .uid("q5-top").name("q5-top");
      case "q7" -> rows = bids(events).keyBy(b -> b.auction, Types.LONG)
          .window(TumblingEventTimeWindows.of(Duration.ofMillis(WINDOW_MS)))
          .aggregate(new BestBids(), new Q7WindowStart())
          .uid("q7-auction-max").name("q7-auction-max")
          .keyBy(b -> b.windowStart, Types.LONG).process(new Q7Max())
          .returns(Types.TUPLE(Types.LONG, Types.LONG, Types.LONG, Types.LONG, Types.LONG))
          .uid("q7-max").name("q7-max");
      case "q8" -> {
        DataStream<NexmarkEvents.Person> persons = events.filter(e -> e.person != null)
            .name("persons").map(e -> e.person).returns(NexmarkEvents.Person.class).name("persons");
        DataStream<NexmarkEvents.Auction> auctions = events.filter(e -> e.auction != null)
            .name("auctions").map(e -> e.auction).returns(NexmarkEvents.Auction.class)
            .name("auctions");
        rows = persons.connect(auctions)
            .keyBy(p -> Tuple2.of(p.id, window(p.dateTime)),
                   a -> Tuple2.of(a.seller, window(a.dateTime)), Types.TUPLE(Types.LONG, Types.LONG))
            .process(new Q8Join())
            .returns(Types.TUPLE(Types.LONG, Types.STRING, Types.LONG))
            .uid("q8-join").name("q8-join");
      }
      default -> {
        DataStream<NexmarkEvents.Auction> auctions = events.filter(e -> e.auction != null)
            .name("auctions").map(e -> e.auction).returns(NexmarkEvents.Auction.class).name("auctions");
        rows = auctions.connect(bids(events)).keyBy(a -> a.id, b -> b.auction, Types.LONG)
            .process(new Q4Winning()).returns(Types.TUPLE(Types.LONG, Types.LONG, Types.LONG))
            .uid("q4-winning").name("q4-winning")
            .keyBy(w -> w.f1, Types.LONG).process(new Q4Average())
            .returns(Types.TUPLE(Types.LONG, Types.LONG, Types.LONG))
            .uid("q4-average").name("q4-average");
      }
    }
    @SuppressWarnings({"unchecked", "rawtypes"})
    DataStream<Object> any = (DataStream) rows;
    any.sinkTo(new DiscardingSink<>()).name("sink");
    return env.getStreamGraph().getJobGraph();
  }

  public static void main(String[] args) throws Exception {
    Options o = parse(args);
    Path checkpoints = o.checkpointParent == null
        ? Files.createTempDirectory("flink-nexmark-")
        : Files.createTempDirectory(Path.of(o.checkpointParent), "flink-nexmark-");
    FlinkPeer.Options base = new FlinkPeer.Options();
    base.parallelism = o.parallelism;
    Configuration conf = FlinkPeer.configuration(base, checkpoints);
    MiniCluster cluster = new MiniCluster(new MiniClusterConfiguration.Builder()
        .setConfiguration(conf).setNumTaskManagers(1).setNumSlotsPerTaskManager(o.parallelism)
        .build());
    String json;
    try {
      cluster.start();
      var id = cluster.submitJob(build(o, conf)).get().getJobID();
      JobResult result = cluster.requestJobResult(id).get();
      if (!result.isSuccess()) throw new IllegalStateException("the Flink job failed: " + result);
      long ms = result.getNetRuntime();
      List<Long> durations = new ArrayList<>(CheckpointLog.COMPLETED_MS.values());
      Collections.sort(durations);
      String p50 = durations.isEmpty() ? "null"
          : Long.toString(durations.get((int) Math.round(0.5 * (durations.size() - 1))));
      String p99 = durations.isEmpty() ? "null"
          : Long.toString(durations.get((int) Math.round(0.99 * (durations.size() - 1))));
      json = String.format(Locale.ROOT,
          "{\"system\":\"flink\",\"flink_version\":\"%s\",\"query\":\"%s\",\"events\":%d,"
              + "\"parallelism\":%d,\"interval_ms\":%d,\"seconds\":%.3f,\"events_per_s\":%.1f,"
              + "\"checkpoints\":%d,\"checkpoint_p50_ms\":%s,\"checkpoint_p99_ms\":%s}",
          org.apache.flink.runtime.util.EnvironmentInformation.getVersion(), o.query, o.events,
          o.parallelism, o.intervalMs, ms / 1000.0, ms > 0 ? o.events * 1000.0 / ms : 0,
          durations.size(), p50, p99);
    } finally {
      cluster.close();
      FlinkPeer.deleteTree(checkpoints);
    }
    System.out.println(json);
    System.out.flush();
    System.exit(0);
  }
}

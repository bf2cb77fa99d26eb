package snapflow.bench;

import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.slf4j.Logger;
import org.slf4j.helpers.NOPLogger;

/**
 * Flink's trigger -> completion duration per checkpoint, two ways, from its CheckpointCoordinator's
 * own log calls. The peer's SLF4J binding (org.slf4j.impl.StaticLoggerBinder) hands that logger
 * out as a proxy that keeps what it needs; every other logger is silent, and nothing is
 * formatted or written.
 *
 * <ul>
 *   <li>COMPLETED_MS: the "Completed checkpoint {} for job {} ({} bytes, checkpointDuration={}
 *       ms, ...)" argument, computed by Flink as completion timestamp - trigger timestamp: the
 *       finalisation included (Flink's REST end_to_end_duration stops at the latest
 *       acknowledgement), whole milliseconds.
 *   <li>TRIGGER_NS / COMPLETED_NS: System.nanoTime() when the coordinator logs "Triggering
 *       checkpoint {} ..." and "Completed checkpoint {} ...", both on its own thread, so their
 *       difference has microsecond resolution. The triggering line comes after Flink took the
 *       trigger timestamp and initialised the checkpoint's storage location, so this duration
 *       leaves that part out: it is a lower bound on Flink's, never an overestimate.
 * </ul>
 */
public final class CheckpointLog {
  static final String COORDINATOR = "org.apache.flink.runtime.checkpoint.CheckpointCoordinator";
  static final String TRIGGERING = "Triggering checkpoint {} (type={})";
  static final String COMPLETED = "Completed checkpoint {} for job {} ({} bytes, checkpointDuration={} ms";

  /** checkpoint id -> checkpointDuration in ms, as Flink logged it. */
  static final Map<Long, Long> COMPLETED_MS = new ConcurrentHashMap<>();
  /** checkpoint id -> System.nanoTime() of the coordinator's triggering / completed line. */
  static final Map<Long, Long> TRIGGER_NS = new ConcurrentHashMap<>();
  static final Map<Long, Long> COMPLETED_NS = new ConcurrentHashMap<>();

  private CheckpointLog() {}

  public static Logger logger(String name) {
    if (!COORDINATOR.equals(name)) return NOPLogger.NOP_LOGGER;
    return (Logger)
        Proxy.newProxyInstance(
            Logger.class.getClassLoader(), new Class<?>[] {Logger.class}, CheckpointLog::invoke);
  }

  private static Object invoke(Object proxy, Method method, Object[] args) {
    switch (method.getName()) {
      case "getName":
        return COORDINATOR;
      case "toString":
        return "CheckpointLog(" + COORDINATOR + ")";
      case "hashCode":
        return System.identityHashCode(proxy);
      case "equals":
        return proxy == args[0];
      case "isInfoEnabled":
        return true;
      case "info":
        if (args != null && args.length == 2 && args[0] instanceof String format
            && args[1] instanceof Object[] values && values.length >= 1
            && values[0] instanceof Long id) {
          long now = System.nanoTime();
          if (format.startsWith(TRIGGERING)) {
            TRIGGER_NS.put(id, now);
          } else if (format.startsWith(COMPLETED)) {
            COMPLETED_NS.put(id, now);
            if (values.length >= 4 && values[3] instanceof Long durationMs)
              COMPLETED_MS.put(id, durationMs);
          }
        }
        return null;
      default:
        return method.getReturnType() == boolean.class ? Boolean.FALSE : null;
    }
  }
}

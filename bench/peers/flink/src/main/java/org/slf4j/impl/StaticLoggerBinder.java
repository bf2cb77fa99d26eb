package org.slf4j.impl;

import org.slf4j.ILoggerFactory;
import org.slf4j.spi.LoggerFactoryBinder;

import snapflow.bench.CheckpointLog;

/**
 * The peer's SLF4J 1.7 binding: every logger is silent (as slf4j-nop was) except Flink's
 * CheckpointCoordinator, whose "Completed checkpoint" line carries Flink's own trigger ->
 * completion duration (snapflow.bench.CheckpointLog keeps it).
 */
public final class StaticLoggerBinder implements LoggerFactoryBinder {
  public static String REQUESTED_API_VERSION = "1.6.99";
  private static final StaticLoggerBinder SINGLETON = new StaticLoggerBinder();

  public static StaticLoggerBinder getSingleton() {
    return SINGLETON;
  }

  @Override
  public ILoggerFactory getLoggerFactory() {
    return CheckpointLog::logger;
  }

  @Override
  public String getLoggerFactoryClassStr() {
    return CheckpointLog.class.getName();
  }
}

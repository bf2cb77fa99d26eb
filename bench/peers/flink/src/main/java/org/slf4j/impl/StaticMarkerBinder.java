package org.slf4j.impl;

import org.slf4j.IMarkerFactory;
import org.slf4j.helpers.BasicMarkerFactory;
import org.slf4j.spi.MarkerFactoryBinder;

/** SLF4J's basic markers (the binding's other half). */
public final class StaticMarkerBinder implements MarkerFactoryBinder {
  public static final StaticMarkerBinder SINGLETON = new StaticMarkerBinder();
  private final IMarkerFactory factory = new BasicMarkerFactory();

  public static StaticMarkerBinder getSingleton() {
    return SINGLETON;
  }

  @Override
  public IMarkerFactory getMarkerFactory() {
    return factory;
  }

  @Override
  public String getMarkerFactoryClassStr() {
    return BasicMarkerFactory.class.getName();
  }
}

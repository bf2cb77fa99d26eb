package org.slf4j.impl;

import org.slf4j.helpers.NOPMDCAdapter;
import org.slf4j.spi.MDCAdapter;

/** No MDC: nothing is logged that would show it (the binding's other half). */
public final class StaticMDCBinder {
  public static final StaticMDCBinder SINGLETON = new StaticMDCBinder();

  public static StaticMDCBinder getSingleton() {
    return SINGLETON;
  }

  public MDCAdapter getMDCA() {
    return new NOPMDCAdapter();
  }

  public String getMDCAdapterClassStr() {
    return NOPMDCAdapter.class.getName();
  }
}

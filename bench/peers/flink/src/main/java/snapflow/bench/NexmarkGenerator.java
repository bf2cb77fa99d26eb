package snapflow.bench;

import java.io.Serializable;

/**
 * workloads/nexmark/nexmark_generator.cpp ported line by line: event n is a pure function of n
 * and the seed (a splitmix64 sequence seeded from both), with the same proportions (per 50
 * events 1 person, 3 auctions, 46 bids), ids, hot ratios and sizes. Unsigned 64-bit arithmetic
 * is spelled out where C++ has it built in. Prices go through Math.pow, which may differ from
 * the C library's pow in the last bit, so a price could differ by a cent (none did over the
 * first 200,000 events when the port was checked against the C++ output).
 */
public final class NexmarkGenerator implements Serializable {
  private static final long serialVersionUID = 1L;

  public static final long FIRST_PERSON_ID = 1000;
  public static final long FIRST_AUCTION_ID = 1000;
  public static final long FIRST_CATEGORY_ID = 10;
  public static final long CATEGORIES = 5;
  public static final long PERSON_ID_LEAD = 10;
  public static final long AUCTION_ID_LEAD = 10;

  static final String[] FIRST_NAMES = {"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate",
      "Julie", "Sarah", "Deiter", "Walter", "Ada"};
  static final String[] LAST_NAMES = {"Shultz", "Abrams", "Spencer", "White", "Bartels",
      "Walton", "Smith", "Jones", "Noris", "Lovelace"};
  static final String[] US_STATES = {"AZ", "CA", "ID", "OR", "WA", "WY"};
  static final String[] US_CITIES = {"Phoenix", "Los Angeles", "San Francisco", "Boise",
      "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"};
  static final String[] HOT_CHANNELS = {"Google", "Facebook", "Baidu", "Apple"};
  static final long OTHER_CHANNELS = 10_000;
  static final long GOLDEN = 0x9e3779b97f4a7c15L;

  public long seed = 1;
  public long baseTimeMs = 1_700_000_000_000L;
  public long eventsPerSecond = 10_000;
  public long personProportion = 1;
  public long auctionProportion = 3;
  public long bidProportion = 46;
  public long activePeople = 1_000;
  public long inFlightAuctions = 100;
  public long hotAuctionRatio = 2;
  public long hotBidderRatio = 4;
  public long hotSellerRatio = 4;
  public long avgPersonBytes = 200;
  public long avgAuctionBytes = 500;
  public long avgBidBytes = 100;

  long total() {
    return personProportion + auctionProportion + bidProportion;
  }

  static long mix(long z) {
    z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
    z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
    return z ^ (z >>> 31);
  }

  /** The random draws of one event. */
  static final class Draw {
    long state;

    Draw(long seed, long n) {
      state = mix(seed) ^ mix(n + GOLDEN);
    }

    long next() {
      state += GOLDEN;
      return mix(state);
    }

    /** Uniform in [0, bound): the high 64 bits of the unsigned 128-bit product. */
    long below(long bound) {
      long x = next();
      return Math.multiplyHigh(x, bound) + ((x >> 63) & bound);
    }

    double unit() {
      return (next() >>> 11) * 0x1.0p-53;
    }

    String pick(String[] from) {
      return from[(int) below(from.length)];
    }

    String letters(int length) {
      char[] out = new char[length];
      long bits = 0;
      for (int i = 0; i < length; ++i) {
        if (i % 12 == 0) bits = next();
        out[i] = (char) ('a' + Long.remainderUnsigned(bits, 26));
        bits = Long.divideUnsigned(bits, 26);
      }
      return new String(out);
    }

    long price() {
      return Math.round(Math.pow(10.0, unit() * 6.0) * 100.0);
    }
  }

  public boolean isBid(long n) {
    return n % total() >= personProportion + auctionProportion;
  }

  public long timestampOf(long n) {
    return baseTimeMs + n * 1_000_000L / eventsPerSecond / 1000L;
  }

  long lastPerson(long n) {
    long epoch = n / total();
    long offset = n % total();
    return epoch * personProportion + Math.min(offset, personProportion - 1);
  }

  long lastAuction(long n) {
    long epoch = n / total();
    long offset = n % total();
    if (offset < personProportion) {
      --epoch;
      offset = auctionProportion - 1;
    } else if (offset >= personProportion + auctionProportion) {
      offset = auctionProportion - 1;
    } else {
      offset -= personProportion;
    }
    return epoch * auctionProportion + offset;
  }

  long somePerson(long n, Draw d) {
    long people = lastPerson(n) + 1;
    long active = Math.min(people, activePeople);
    return people - active + d.below(active + PERSON_ID_LEAD);
  }

  long someAuction(long n, Draw d) {
    long newest = Math.max(lastAuction(n), 0);
    long oldest = Math.max(newest - inFlightAuctions, 0);
    return oldest + d.below(newest - oldest + 1 + AUCTION_ID_LEAD);
  }

  public NexmarkEvents.Event at(long n) {
    Draw d = new Draw(seed, n);
    NexmarkEvents.Event e = new NexmarkEvents.Event();
    e.number = n;
    long offset = n % total();
    if (offset < personProportion) e.person = person(n, d);
    else if (offset < personProportion + auctionProportion) e.auction = auction(n, d);
    else e.bid = bid(n, d);
    return e;
  }

  NexmarkEvents.Person person(long n, Draw d) {
    NexmarkEvents.Person p = new NexmarkEvents.Person();
    p.id = lastPerson(n) + FIRST_PERSON_ID;
    // The draws in the C++ generator's order (one statement each there).
    String lastName = d.pick(LAST_NAMES);
    String firstName = d.pick(FIRST_NAMES);
    p.name = firstName + " " + lastName;
    String domain = d.letters(5);
    String user = d.letters(7);
    p.emailAddress = user + "@" + domain + ".com";
    long[] card = new long[4];
    for (int i = 3; i >= 0; --i) card[i] = 1000 + d.below(9000);
    p.creditCard = card[0] + " " + card[1] + " " + card[2] + " " + card[3];
    p.city = d.pick(US_CITIES);
    p.state = d.pick(US_STATES);
    p.dateTime = timestampOf(n);
    long used = 8 + p.name.length() + p.emailAddress.length() + p.creditCard.length()
        + p.city.length() + p.state.length() + 8;
    p.extra = used < avgPersonBytes ? d.letters((int) (avgPersonBytes - used)) : "";
    return p;
  }

  NexmarkEvents.Auction auction(long n, Draw d) {
    NexmarkEvents.Auction a = new NexmarkEvents.Auction();
    a.id = lastAuction(n) + FIRST_AUCTION_ID;
    long seller = d.below(hotSellerRatio) > 0
        ? (lastPerson(n) / hotSellerRatio) * hotSellerRatio
        : somePerson(n, d);
    a.seller = seller + FIRST_PERSON_ID;
    a.category = FIRST_CATEGORY_ID + d.below(CATEGORIES);
    a.itemName = d.letters(20);
    a.description = d.letters(100);
    a.initialBid = d.price();
    a.reserve = a.initialBid + d.price();
    a.dateTime = timestampOf(n);
    long ahead = inFlightAuctions * total() / auctionProportion;
    long horizonMs = timestampOf(n + ahead) - a.dateTime;
    a.expires = a.dateTime + 1 + d.below(Math.max(2 * horizonMs, 1));
    long used = 8 + a.itemName.length() + a.description.length() + 8 * 6;
    a.extra = used < avgAuctionBytes ? d.letters((int) (avgAuctionBytes - used)) : "";
    return a;
  }

  NexmarkEvents.Bid bid(long n, Draw d) {
    NexmarkEvents.Bid b = new NexmarkEvents.Bid();
    long auction = d.below(hotAuctionRatio) > 0
        ? (Math.max(lastAuction(n), 0) / hotAuctionRatio) * hotAuctionRatio
        : someAuction(n, d);
    b.auction = auction + FIRST_AUCTION_ID;
    long bidder = d.below(hotBidderRatio) > 0
        ? (lastPerson(n) / hotBidderRatio) * hotBidderRatio + 1
        : somePerson(n, d);
    b.bidder = bidder + FIRST_PERSON_ID;
    b.price = d.price();
    if (d.below(10) > 0) {
      b.channel = d.pick(HOT_CHANNELS);
      b.url = "https://www.nexmark.com/" + b.channel + "/item.htm?query=1";
    } else {
      long channel = d.below(OTHER_CHANNELS);
      b.channel = "channel-" + channel;
      String second = d.letters(5);
      String first = d.letters(5);
      b.url = "https://www.nexmark.com/" + first + "/" + second
          + "/item.htm?query=1&channel_id=" + channel;
    }
    b.dateTime = timestampOf(n);
    long used = 8 * 4 + b.channel.length() + b.url.length();
    b.extra = used < avgBidBytes ? d.letters((int) (avgBidBytes - used)) : "";
    return b;
  }
}

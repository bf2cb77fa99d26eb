package snapflow.bench;

/**
 * Nexmark's three event kinds and the event that carries exactly one of them, as Flink POJOs
 * (public fields, no-argument constructors), mirroring workloads/nexmark/nexmark_events.hpp.
 */
public final class NexmarkEvents {
  private NexmarkEvents() {}

  public static final class Person {
    public long id;
    public String name;
    public String emailAddress;
    public String creditCard;
    public String city;
    public String state;
    public long dateTime;
    public String extra;

    public Person() {}
  }

  public static final class Auction {
    public long id;
    public String itemName;
    public String description;
    public long initialBid;
    public long reserve;
    public long dateTime;
    public long expires;
    public long seller;
    public long category;
    public String extra;

    public Auction() {}
  }

  public static final class Bid {
    public long auction;
    public long bidder;
    public long price;
    public String channel;
    public String url;
    public long dateTime;
    public String extra;

    public Bid() {}
  }

  /** One event: its number and one non-null kind. */
  public static final class Event {
    public long number;
    public Person person;
    public Auction auction;
    public Bid bid;

    public Event() {}
  }
}

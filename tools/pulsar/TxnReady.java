import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.AuthenticationFactory;
import org.apache.pulsar.client.api.ClientBuilder;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.Transaction;

/**
 * Readiness probe of tools/pulsar/start.sh: opens one transaction on the broker at args[0]
 * and aborts it, with the Java client on the broker's own classpath, run as a single source
 * file ({@code java -cp <classpath> TxnReady.java pulsar://127.0.0.1:16650}).
 *
 * <p>Pulsar 4.0 loads a transaction coordinator only when a transactional client first
 * connects to it, so no admin endpoint reports one as ready before that; this both loads the
 * coordinators and proves that they serve. Exit status 0 when the transaction round trip
 * worked, 1 otherwise (start.sh retries until its deadline).
 *
 * <p>When the environment variable {@code PULSAR_AUTH_TOKEN} is set (a configuration overlay
 * turned authentication on), the client authenticates with that token.
 */
public final class TxnReady {
    private TxnReady() {
    }

    public static void main(String[] args) {
        if (args.length != 1) {
            System.err.println("usage: TxnReady <pulsar service URL>");
            System.exit(2);
        }
        ClientBuilder builder = PulsarClient.builder()
                .serviceUrl(args[0])
                .enableTransaction(true)
                .operationTimeout(15, TimeUnit.SECONDS);
        String token = System.getenv("PULSAR_AUTH_TOKEN");
        if (token != null && !token.isEmpty()) {
            builder.authentication(AuthenticationFactory.token(token));
        }
        try (PulsarClient client = builder.build()) {
            Transaction txn = client.newTransaction()
                    .withTransactionTimeout(1, TimeUnit.MINUTES)
                    .build()
                    .get(30, TimeUnit.SECONDS);
            txn.abort().get(30, TimeUnit.SECONDS);
            System.out.println("transaction " + txn.getTxnID() + " opened and aborted");
        } catch (Exception e) {
            System.out.println("transaction coordinator not ready: " + e);
            System.exit(1);
        }
        System.exit(0);
    }
}
